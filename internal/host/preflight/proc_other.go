//go:build !linux

package preflight

import (
	"errors"
	"os"
	"syscall"
)

// processIdentity reports whether pid runs; without /proc the start time
// is unknown, so a live pid is always protected.
func processIdentity(pid int) (alive bool, start uint64, known bool) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false, 0, false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || !errors.Is(err, os.ErrProcessDone), 0, false
}
