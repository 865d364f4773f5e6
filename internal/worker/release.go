package worker

import (
	"context"
	"os"
	"time"
)

// The host takes its last reading of the container's cgroup (peak memory,
// OOM kills, pids.max events, CPU time) after the task has finished and
// before the container exits, because the cgroup disappears with the
// container. The worker holds the container open for it: once its output
// is written and announced (output_written), it waits, bounded by the
// start packet's ReleaseWaitMillis, until the host sends the container
// messages.ReleaseSignal (one Engine API kill call; the container's init
// forwards it to the worker). The task is gone by then (killStragglers); a
// signal it sent earlier is discarded before the wait begins, and a late or
// missing release only costs the wait.

// maxReleaseWaitMillis bounds the release wait.
const maxReleaseWaitMillis = 60_000

// clearRelease discards every release already delivered (the task's own,
// sent while it ran), before the wait.
func clearRelease(released <-chan os.Signal) {
	for {
		select {
		case <-released:
		default:
			return
		}
	}
}

// awaitRelease waits until released delivers, wait passes or ctx ends,
// and reports whether the host released the worker.
func awaitRelease(ctx context.Context, released <-chan os.Signal, wait time.Duration) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	select {
	case <-released:
		return true
	case <-ctx.Done():
		return false
	case <-deadline.C:
		return false
	}
}

// awaitHostRelease waits for the host's release when the start packet asks
// for it (see the top of this file). It does not wait once ctx has ended:
// a worker told to stop (SIGTERM: the host is stopping the container,
// after a cancellation or its lease watchdog) exits at once, since the
// host takes no last reading then.
func (r *run) awaitHostRelease(ctx context.Context) {
	if r.pkt.ReleaseWaitMillis <= 0 || ctx.Err() != nil {
		return
	}
	wait := time.Duration(r.pkt.ReleaseWaitMillis) * time.Millisecond
	if !awaitRelease(ctx, r.cfg.Released, wait) {
		if ctx.Err() != nil {
			r.note("stopped while waiting for the host's release")
			return
		}
		r.note("the host did not release the worker within %s", wait)
	}
}
