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
	watchInterval = 50 * time.Millisecond
	// fullBelowBytes: ext4 answers ENOSPC while statfs still shows up to
	// about 1 MiB available (seen: 914 KiB on a 256 MiB workspace), so a
	// file system with less than 2 MiB available counts as full.
	fullBelowBytes = 2 << 20
)

// resourceWatch polls the task's resources on its own goroutine until
// finish.
type resourceWatch struct {
	paths []string
	stop  chan struct{}
	done  chan struct{}

	// notTask are the worker's children that are not the task's (its OOM
	// guards): never counted as task processes.
	notTask map[int]bool

	// fdFloor is the sandbox's descriptor limit (the worker's own hard
	// RLIMIT_NOFILE), below which the exit watch counts no exhaustion.
	fdFloor int

	mu     sync.Mutex
	report messages.TaskResources
	seen   map[string]int // path -> index in report.Storage
}

// startResourceWatch starts watching the file systems at paths, and the
// worker's descendants but notTask.
func startResourceWatch(notTask map[int]bool, paths ...string) *resourceWatch {
	w := &resourceWatch{paths: paths, notTask: notTask, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]int{}, fdFloor: hardFDLimit()}
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
	procs, others := taskProcesses(w.notTask)
	w.mu.Lock()
	defer w.mu.Unlock()
	// Every process beside the worker counts against pids.max, its OOM
	// guards too: the host compares this count with the limit where it
	// cannot read pids.events.
	w.report.MaxProcesses = max(w.report.MaxProcesses, len(procs)+others)
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

func (w *resourceWatch) pollStorage() { w.recordStorage(w.statStorage(), false) }

// statStorage takes statfs of the watched file systems (nil entries for
// those it could not read).
func (w *resourceWatch) statStorage() []*fsStat {
	out := make([]*fsStat, len(w.paths))
	for i, path := range w.paths {
		if st, err := statFS(path); err == nil {
			out[i] = &st
		}
	}
	return out
}

// sawHeld records what the exit watch saw while it held a task process:
// its descriptors when it was exiting (files), and the file systems. A
// process counts as out of descriptors only at a limit no lower than the
// sandbox's (fdFloor): a task cannot lower its own limit to claim it.
func (w *resourceWatch) sawHeld(files *procFiles, storage []*fsStat) {
	w.recordStorage(storage, true)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.report.ExitWatch = true
	if files == nil {
		return
	}
	if files.openFiles > w.report.MaxOpenFiles {
		w.report.MaxOpenFiles, w.report.FDLimit = files.openFiles, files.fdLimit
	}
	if files.fdLimit > 0 && files.fdLimit >= w.fdFloor && files.openFiles >= files.fdLimit {
		w.report.FDExhausted = true
		w.report.MaxOpenFiles, w.report.FDLimit = files.openFiles, files.fdLimit
	}
}

// recordStorage merges one statfs of each watched file system; held says
// the exit watch held a task process at the time.
func (w *resourceWatch) recordStorage(stats []*fsStat, held bool) {
	for i, path := range w.paths {
		if stats[i] == nil {
			continue
		}
		st := *stats[i]
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
		full := st.total > 0 && st.free < fullBelowBytes
		o.Full = o.Full || full
		o.FullWhenFreed = o.FullWhenFreed || (held && full)
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
