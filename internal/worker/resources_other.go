//go:build !linux

package worker

import "errors"

func statFS(string) (fsStat, error) { return fsStat{}, errors.ErrUnsupported }

func taskProcesses(map[int]bool) ([]procFiles, int) { return nil, 0 }

func raiseOOMScore(int) {}

func hardFDLimit() int { return 0 }
