package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// HelperPath is the PATH an operator's helper program runs with.
const HelperPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// helperWaitDelay bounds how long a helper's output is read after it
// exited (a background process it left may hold the pipe).
const helperWaitDelay = 2 * time.Second

// HelperEnv is a helper program's whole environment: HelperPath, the C
// locale, extra ("NAME=value"), and the daemon's HOME and TMPDIR. None of
// the daemon's own variables (FORGED_*, proxies, tokens, git settings) is
// passed on.
func HelperEnv(extra ...string) []string {
	env := append([]string{"PATH=" + HelperPath, "LC_ALL=C"}, extra...)
	for _, name := range []string{"HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// RunHelper runs cmd, a helper program, to its end as the leader of its own
// process group (Isolate), reading its output at most 2 s past its exit,
// then kills whatever it left in its group: nothing it started outlives it.
func RunHelper(cmd *exec.Cmd) error {
	Isolate(cmd)
	cmd.WaitDelay = helperWaitDelay
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return err
}

// DescribeExit renders how a helper ended: "exit status N" or "killed by
// signal S".
func DescribeExit(exit *exec.ExitError) string {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", exit.ExitCode())
}
