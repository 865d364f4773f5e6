// Package procgroup runs the operator's helper programs (image verifier,
// publication and provider-auth helpers, git): it checks that a configured
// helper is an executable file, and runs a child process as the leader of
// its own process group, so that cancelling it kills everything it started.
package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// CheckExecutable checks that path, a helper program the operator
// configured, is a clean absolute path to an executable regular file.
// Errors name the helper as what ("publication helper").
func CheckExecutable(what, path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%s %q: must be a clean absolute path", what, path)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s %s: not an executable regular file", what, path)
	}
	return nil
}

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
