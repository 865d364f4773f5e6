package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// HostFacts is what the Checker learns from the machine forged runs on.
// LocalHost reads the real one; tests substitute their own.
type HostFacts interface {
	// Platform is forged's GOOS and GOARCH.
	Platform() (goos, goarch string)
	// AvailableMemory is the memory that can be allocated without swapping
	// (MemAvailable on Linux).
	AvailableMemory() (int64, error)
	// CPUCores is the number of cores forged may use.
	CPUCores() int
	// DiskUsage measures the filesystem holding path: its size and the
	// bytes available to unprivileged writers.
	DiskUsage(path string) (totalBytes, freeBytes int64, err error)
}

// LocalHost returns the HostFacts of this machine: /proc/meminfo, statfs,
// and runtime.NumCPU capped by the CPU quota of forged's cgroup.
func LocalHost() HostFacts { return localHost{} }

type localHost struct{}

func (localHost) Platform() (string, string) { return runtime.GOOS, runtime.GOARCH }

func (localHost) AvailableMemory() (int64, error) { return availableMemory() }

func (localHost) CPUCores() int {
	n := runtime.NumCPU()
	if q, ok := cgroupCPUQuota(); ok {
		n = min(n, max(int(q), 1))
	}
	return n
}

func (localHost) DiskUsage(path string) (int64, int64, error) { return diskUsage(path) }

// existingAncestor returns path or its nearest existing ancestor, so that a
// state root that does not exist yet can still be measured.
func existingAncestor(path string) (string, error) {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", errors.New("no existing ancestor of " + path)
		}
		p = parent
	}
}
