//go:build !linux || !(amd64 || arm64)

package worker

import (
	"fmt"
	"os"
)

// TaskExecCommand is the task shim's subcommand (after "worker").
const TaskExecCommand = "task-exec"

// watchAvailable says the exit watch can run here: it needs Linux's
// seccomp user notifications and a known syscall table.
const watchAvailable = false

// TaskExec is not available here.
func TaskExec(string, []string) int {
	fmt.Fprintln(os.Stderr, "forged-worker: worker task-exec runs only on linux/amd64 and linux/arm64")
	return ExitUsage
}

func shimSocket() (worker, shim *os.File, err error) {
	return nil, nil, fmt.Errorf("no exit watch here")
}
func receiveListener(*os.File) int                    { return -1 }
func serveWatch(int, *resourceWatch, <-chan struct{}) {}
