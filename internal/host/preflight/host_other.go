//go:build !linux && !darwin

package preflight

import "errors"

var errHostFactUnsupported = errors.New("host fact not implemented on this platform")

func availableMemory() (int64, error) { return 0, errHostFactUnsupported }

func diskUsage(string) (int64, int64, error) { return 0, 0, errHostFactUnsupported }

func cgroupCPUQuota() (float64, bool) { return 0, false }
