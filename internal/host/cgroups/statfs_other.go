//go:build !linux

package cgroups

import "errors"

func statFS(string) (FSUsage, error) { return FSUsage{}, errors.ErrUnsupported }
