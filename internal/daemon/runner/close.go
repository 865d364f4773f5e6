package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/actorkit"
)

// Close stops the actor tree and waits for the work it left in flight
// before it closes the Docker clients and releases the Docker context lock.
// Running attempts are not torn down by Close (cancel them first, or let
// the next start's reaper do it), but a teardown already under way, or a
// crashed attempt's cleanup, runs to its end: stopping an actor does not
// stop its goroutines, and they still use the clients.
//
// The wait is bounded by Config.CloseTimeout. When the deadline passes
// with work still running, Close logs an error naming it and returns an
// error (a *LateWorkError); the clients stay open and the lock held until
// that work ends, and are released then, on their own (a process that
// exits releases the lock anyway). Close never waits longer than the
// deadline. Calling Close again returns the first call's result.
func (r *Runner) Close() error { return r.release() }

// LateWorkError is Close's report of work the stopped tree left running
// past the deadline.
type LateWorkError struct {
	// Running names the work by step ("teardown", "crashed attempt
	// cleanup", …, with counts).
	Running string
	Waited  time.Duration
}

func (e *LateWorkError) Error() string {
	return fmt.Sprintf("runner: the actor tree's work still runs %s after it stopped (%s); the Docker clients and the context lock are released when it ends", e.Waited, e.Running)
}

// release is the one release path, for Close and for a failed New: it
// stops the tree (when start spawned one) and waits for its work, then
// runs the closers, newest first. Work still running at the deadline
// defers the closers until it ends.
func (r *Runner) release() error {
	r.releaseOnce.Do(func() {
		if r.tree != nil {
			stopErr, late := r.tree.stop(r.closeTimeout, r.logger)
			if late != nil {
				r.logger.Error("closing the runner: the stopped tree's work outlived the deadline; the Docker clients and the context lock stay until it ends",
					"running", late.Running, "waited", late.Waited)
				idle := r.tree.work.Idle()
				go func() { // owned by the runner; ends with the late work
					<-idle
					if err := r.closers.close(); err != nil {
						r.logger.Error("closing the runner after the late work ended", "err", err)
					}
					r.logger.Info("the late work ended; the Docker clients are closed and the context lock released")
				}()
				r.releaseErr = errors.Join(stopErr, late)
				return
			}
			r.releaseErr = stopErr
		}
		r.releaseErr = errors.Join(r.releaseErr, r.closers.close())
	})
	return r.releaseErr
}

// tree is the running actor tree: its system, root, and the work its
// actors run on their goroutines.
type tree struct {
	system   *actor.ActorSystem
	root     *actor.PID // nil when the spawn failed
	work     *actorkit.Work
	stopDead func()
}

// rootStopTimeout bounds the wait for the root supervisor, and with it
// every actor below it, to stop (protoactor's StopFuture).
const rootStopTimeout = 10 * time.Second

// stop stops the root and waits for it (children stop before their
// parent), then waits up to timeout for the work the actors started, then
// shuts the system down. It returns the work still running after timeout
// as late; stopErr is a root that did not stop in time.
func (t *tree) stop(timeout time.Duration, logger *slog.Logger) (stopErr error, late *LateWorkError) {
	start := time.Now()
	if t.root != nil {
		if err := t.system.Root.StopFuture(t.root).Wait(); err != nil {
			stopErr = fmt.Errorf("runner: the root supervisor did not stop within %s: %w", rootStopTimeout, err)
		}
	}
	idle := t.work.Idle()
	select {
	case <-idle:
	default:
		logger.Info("closing the runner: waiting for the stopped tree's work before closing the Docker clients", "running", t.work.Running(), "timeout", timeout)
		deadline := time.NewTimer(timeout - time.Since(start))
		defer deadline.Stop()
		select {
		case <-idle:
		case <-deadline.C:
			late = &LateWorkError{Running: t.work.Running(), Waited: time.Since(start).Round(time.Millisecond)}
		}
	}
	t.stopDead()
	t.system.Shutdown()
	return stopErr, late
}

// closers release what New opened, newest first.
type closers []func() error

func (c *closers) push(close func() error) { *c = append(*c, close) }

// close runs every closer, newest first, joining their errors.
func (c *closers) close() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}
