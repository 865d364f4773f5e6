//go:build linux

package worker

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OOM guards: why the worker survives its task's OOM.
//
// The task runs at oom_score_adj 1000 (the shim sets it before it execs
// the task), the worker at the container's 0: while a task process lives,
// the memory cgroup's OOM killer takes it, not the worker. That alone
// failed about 1 run in 7 on a 2-core machine under I/O load (seen on the
// real engine, dmesg): 10 to 35 ms after the task was killed, a charge of
// the worker's (a /proc read's buffer, a signal frame) invoked the OOM
// killer again, and its task list held only docker-init and the worker,
// which it killed with its output uncommitted. The dying task was still
// charged for its memory (its exit had not unmapped it yet), but the
// kernel no longer lists it: a cgroup's process walk skips a dying group
// leader whose threads are all past their exit, and its memory is freed
// only after that.
//
// A negative score would keep the worker out of that choice, but setting
// one needs CAP_SYS_RESOURCE in the engine (dockerd's runc writes the
// container's oom_score_adj): engines without it in their bounding set
// (this CI's, rootless ones) fail the container's start. So the worker
// gives the OOM killer other candidates instead: before the task starts it
// starts oomGuards guard processes (`forged-worker worker oom-guard`), each
// at oom_score_adj 1000 and small (the idle worker binary), outside the
// task's process group. While a task process is listed, it outranks them
// (its score adds its memory to the same 1000); in the moment when the
// dying task is not listed, a guard is the OOM killer's choice, not the
// worker, and its death frees the few pages the worker's charge needs
// while the task's memory drains. killStragglers ends them with whatever
// the task left. A task can kill the guards itself (same uid); it then
// only risks its own output.

// oomGuards is how many guard processes the worker starts. Each buys the
// worker one OOM kill in the window above (a second one can come before
// the first guard's exit has freed its memory).
const oomGuards = 3

// OOMGuardCommand is the guard's subcommand (after "worker").
const OOMGuardCommand = "oom-guard"

// OOMGuard is the guard process: it raises its own oom_score_adj to 1000
// and waits, doing nothing, until it is killed.
func OOMGuard() int {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0); err != nil {
		return 1
	}
	for {
		_ = unix.Pause()
	}
}

// startOOMGuards starts n guards from the worker binary exe (nil with no
// binary), each in a process group of its own, and returns their pids.
// The guards are the worker's children: killStragglers kills and reaps
// them after the task.
func startOOMGuards(exe string, n int) map[int]bool {
	if exe == "" {
		return nil
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	defer devnull.Close()
	pids := map[int]bool{}
	for range n {
		p, err := os.StartProcess(exe, []string{exe, "worker", OOMGuardCommand}, &os.ProcAttr{
			Env:   []string{},
			Files: []*os.File{devnull, devnull, devnull},
			Sys:   &syscall.SysProcAttr{Setpgid: true},
		})
		if err != nil {
			break
		}
		pids[p.Pid] = true
		_ = p.Release() // killStragglers reaps it
	}
	return pids
}
