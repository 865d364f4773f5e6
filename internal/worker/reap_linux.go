package worker

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// reapWait bounds how long killStragglers keeps killing and reaping.
const reapWait = 2 * time.Second

// protectProcess hardens the worker process before the task runs:
//
//   - it becomes a child subreaper, so that processes the task detaches
//     (setsid, double fork) are re-parented to the worker instead of the
//     container's init, where killStragglers finds them;
//   - it becomes non-dumpable, so that the task, running as the same user,
//     cannot read the worker's memory (and the start packet in it) through
//     /proc or ptrace.
//
// Both are best effort.
func protectProcess() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// killStragglers kills and reaps every remaining child of the worker once
// the task has exited: as a subreaper the worker inherits whatever the
// task left running outside its process group, and none of it may keep
// changing the workspace while the result is committed. It assumes, as in
// "forged worker", that the process runs nothing else.
func killStragglers() {
	self := os.Getpid()
	deadline := time.Now().Add(reapWait)
	for time.Now().Before(deadline) {
		kids := childPIDs(self)
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		for _, pid := range kids {
			var status unix.WaitStatus
			_, _ = unix.Wait4(pid, &status, unix.WNOHANG, nil)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childPIDs lists the processes whose parent is ppid, from /proc.
func childPIDs(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if parent, ok := statParent(raw); ok && parent == ppid {
			kids = append(kids, pid)
		}
	}
	return kids
}

// statParent extracts the parent pid from /proc/<pid>/stat: "pid (comm)
// state ppid ...", where comm may hold spaces and parentheses.
func statParent(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return ppid, err == nil
}
