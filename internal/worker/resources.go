package worker

import (
	"sync"
	"time"

	"github.com/forgedev/forged/messages"
)

// The worker's own account of its task's resources (messages.TaskResources,
// emitted as a task_resources event after the task ends). It is observed
// from outside the task, by the worker, never read from the task's output:
//
//   - storage: statfs of the task's writable file systems (TMPDIR and the
//     workspace), every watchInterval while the task runs and once after;
//     a file system with less than fullBelowBytes free is full (ENOSPC);
//   - descriptors: for each task process, its open descriptors against its
//     own RLIMIT_NOFILE soft limit (from /proc); a process seen at its
//     limit exhausted its descriptors (EMFILE);
//   - processes: the most task processes seen at once (the host has the
//     kernel's pids.events for the refused forks).
//
// A spike shorter than watchInterval can be missed; the host's kernel
// counters (OOM kills, pids.max events) are exact and win over this report.

// Bounds of the watch.
const (
	watchInterval  = 50 * time.Millisecond
	fullBelowBytes = 64 << 10
)

// resourceWatch polls the task's resources on its own goroutine until
// finish.
type resourceWatch struct {
	paths []string
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	report messages.TaskResources
	seen   map[string]int // path -> index in report.Storage
}

// startResourceWatch starts watching the file systems at paths.
func startResourceWatch(paths ...string) *resourceWatch {
	w := &resourceWatch{paths: paths, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]int{}}
	w.poll()
	go w.loop()
	return w
}

func (w *resourceWatch) loop() {
	defer close(w.done)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.poll()
		}
	}
}

// finish stops the watch, takes a last look at the file systems and
// returns the report.
func (w *resourceWatch) finish(taskFailed bool, taskExitCode int) messages.TaskResources {
	close(w.stop)
	<-w.done
	w.pollStorage()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.report.TaskFailed, w.report.TaskExitCode = taskFailed, taskExitCode
	r := w.report
	r.Storage = append([]messages.StorageObservation(nil), w.report.Storage...)
	return r
}

func (w *resourceWatch) poll() {
	w.pollStorage()
	procs := taskProcesses()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.report.MaxProcesses = max(w.report.MaxProcesses, len(procs))
	for _, p := range procs {
		if p.openFiles > w.report.MaxOpenFiles {
			w.report.MaxOpenFiles, w.report.FDLimit = p.openFiles, p.fdLimit
		}
		if p.fdLimit > 0 && p.openFiles >= p.fdLimit {
			w.report.FDExhausted = true
			w.report.MaxOpenFiles, w.report.FDLimit = p.openFiles, p.fdLimit
		}
	}
}

func (w *resourceWatch) pollStorage() {
	for _, path := range w.paths {
		st, err := statFS(path)
		if err != nil {
			continue
		}
		w.mu.Lock()
		i, ok := w.seen[path]
		if !ok {
			i = len(w.report.Storage)
			w.seen[path] = i
			w.report.Storage = append(w.report.Storage, messages.StorageObservation{Path: path, TotalBytes: st.total, MinFreeBytes: st.free, TmpfsInMemory: st.tmpfs})
		}
		o := &w.report.Storage[i]
		o.MinFreeBytes = min(o.MinFreeBytes, st.free)
		o.MaxUsedBytes = max(o.MaxUsedBytes, st.used)
		o.Full = o.Full || (st.total > 0 && st.free < fullBelowBytes)
		w.mu.Unlock()
	}
}

// fsStat is one statfs: sizes in bytes; free is what an unprivileged
// writer may still use.
type fsStat struct {
	total, free, used uint64
	tmpfs             bool
}

// procFiles is one task process's descriptors.
type procFiles struct {
	openFiles, fdLimit int
}

// reportResources emits the worker's resource report.
func (r *run) reportResources(report messages.TaskResources) {
	content := "task resources observed"
	for _, s := range report.Storage {
		if s.Full {
			content += "; " + s.Path + " was full"
		}
	}
	if report.FDExhausted {
		content += "; a task process reached its open-file limit"
	}
	r.events.lifecycle(messages.TaskResourcesEvent, content, report)
}
