// Package procgroup runs a child process as the leader of its own process
// group, so that cancelling it kills everything it started.
package procgroup

import (
	"os/exec"
	"syscall"
)

// Isolate makes cmd the leader of a new session and process group, and makes
// its context's cancellation kill the whole group (falling back to the
// process alone).
func Isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}
