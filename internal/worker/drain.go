package worker

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Draining the task's output after its process group is gone.
//
// The task may exit with a backlog in its pipes (up to the pipe's
// capacity, tens of thousands of short lines), which the pumps forward
// at the pace the host reads the worker's stdout. That pace is the
// host's, not the task's: a loaded host must not cost an honest task its
// last lines. So the grace counts only the time a pump waits on an empty
// pipe (a read deadline set before each read), never the time it spends
// forwarding a line. A writer that escaped the process group (its own
// session) and holds a pipe open ends the drain after DrainGrace of
// silence; one that keeps writing, after DrainLimit in all.

// Drain defaults used by DefaultConfig.
const (
	DefaultDrainGrace = 2 * time.Second
	DefaultDrainLimit = time.Minute
)

// drainPipes is the read side of the task's pipes as the pumps read them:
// once draining, every read waits at most the grace.
type drainPipes struct {
	files []*os.File
	grace atomic.Int64 // nanoseconds; zero while the task runs
}

// reader returns f (one of the pipes) as the pump reads it.
func (d *drainPipes) reader(f *os.File) *drainReader { return &drainReader{f: f, d: d} }

type drainReader struct {
	f *os.File
	d *drainPipes
}

func (r *drainReader) Read(p []byte) (int, error) {
	if g := r.d.grace.Load(); g > 0 {
		_ = r.f.SetReadDeadline(time.Now().Add(time.Duration(g)))
	}
	return r.f.Read(p)
}

// drain waits for the pumps (done) once the task's process group is gone:
// reads now time out after grace of silence, and the pipes are closed
// under the pumps after limit in all. It reports whether the limit closed
// them (a writer outside the process group kept writing).
func (d *drainPipes) drain(done <-chan struct{}, grace, limit time.Duration) (cut bool) {
	d.grace.Store(int64(grace))
	for _, f := range d.files {
		// A read already waiting has no deadline yet.
		_ = f.SetReadDeadline(time.Now().Add(grace))
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
		closeAll(d.files...)
		<-done
		return true
	}
}

// pumpsDone returns a channel closed once wg is done.
func pumpsDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}
