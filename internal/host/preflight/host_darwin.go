package preflight

import "errors"

// On macOS the sandboxes run in Docker Desktop's Linux VM: the Mac's own
// memory is not what admission needs, the VM's is (the Checker asks the
// engine, desktop.go), and the Mac has no cgroups. The disk is measured
// with statfs (host_statfs.go), on forged's state root.

var errHostFactUnsupported = errors.New("host fact not measured on macOS: Docker Desktop's VM memory comes from the engine")

func availableMemory() (int64, error) { return 0, errHostFactUnsupported }

func cgroupCPUQuota() (float64, bool) { return 0, false }
