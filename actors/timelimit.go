package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/messages"
)

// The host's side of the time limits. The worker stops its own task at the
// hard wall and after the idle limit; the attempt measures both on its own
// clock from the moment the worker container exists, so a worker that
// does not cooperate is stopped all the same:
//
//   - hard wall: a timer armed once, when the worker is created;
//   - idle: a timer re-armed on every line the worker streams (task output
//     and the worker's own events, including task_active while the task's
//     lines exceed the forwarded budget).
//
// When one fires, the limit becomes the attempt's trusted host failure
// (sandbox_hard_wall_exceeded or sandbox_idle_timeout) and the worker gets
// LimitGrace to stop its task and write its output, which is then kept by
// the trusted-failure rule (see onCollected); after the grace the host
// aborts the attempt, which stops the container.

// workerIdleMargin is added to the idle limit the worker enforces itself
// (the start packet's idleTimeoutSeconds). Both measure the silence from
// the task's last line, but the host re-arms its timer when the line
// reaches it, a little after the worker reset its own: with equal limits
// the worker would stop a silent task first, and the host would see a
// worker that failed instead of its own, trusted, idle fact. With the
// margin the host's timer fires first and the worker still stops the
// task itself, within the host's LimitGrace.
const workerIdleMargin = 5 * time.Second

// workerIdle is the idle limit the worker enforces for limits: the host's
// plus workerIdleMargin, never beyond the hard wall (where the idle limit
// no longer matters).
func workerIdle(limits timelimit.Limits) time.Duration {
	return min(limits.Idle+workerIdleMargin, limits.HardWall)
}

// timeLimitFired is the attempt's own timer message. gen tells a stale
// idle timer (re-armed since) from the current one.
type timeLimitFired struct {
	idle bool
	gen  uint64
}

// timeLimitGraceOver ends the worker's grace after a time limit.
type timeLimitGraceOver struct{}

type limitTimers struct {
	limits         timelimit.Limits
	hard, idle     clock.Timer
	grace          clock.Timer
	idleGen        uint64
	armed, stopped bool
	// fired is the time limit the host saw pass.
	fired error
}

// limits are this attempt's time limits: the operator's, shortened by the
// dispatch's task timeout.
func (a *attemptActor) limits() timelimit.Limits {
	return a.cfg.Limits.ForTask(a.d.Task.TimeoutSeconds)
}

// armTimeLimits starts both host timers; called when the worker exists.
func (a *attemptActor) armTimeLimits(ctx actor.Context) {
	a.armTimeLimitsSince(ctx, a.cfg.Clock.Now())
}

// armTimeLimitsSince starts both host timers for a worker created at
// since: the hard wall runs from then (a re-adopted attempt continues its
// limits across the restart), the idle limit from now.
func (a *attemptActor) armTimeLimitsSince(ctx actor.Context, since time.Time) {
	t := &a.timers
	if t.armed || t.stopped {
		return
	}
	t.armed, t.limits = true, a.limits()
	system, self := ctx.ActorSystem(), ctx.Self()
	left := max(t.limits.HardWall-a.cfg.Clock.Now().Sub(since), 0)
	t.hard = a.cfg.Clock.AfterFunc(left, func() { system.Root.Send(self, timeLimitFired{}) })
	a.rearmIdle(ctx)
}

// rearmIdle restarts the idle timer: the worker just wrote something.
func (a *attemptActor) rearmIdle(ctx actor.Context) {
	t := &a.timers
	if !t.armed || t.stopped {
		return
	}
	if t.idle != nil {
		t.idle.Stop()
	}
	t.idleGen++
	gen := t.idleGen
	system, self := ctx.ActorSystem(), ctx.Self()
	t.idle = a.cfg.Clock.AfterFunc(t.limits.Idle, func() { system.Root.Send(self, timeLimitFired{idle: true, gen: gen}) })
}

// stopTimeLimits disarms every limit timer; the worker has exited or the
// attempt is tearing down.
func (a *attemptActor) stopTimeLimits() {
	t := &a.timers
	t.stopped = true
	for _, timer := range []clock.Timer{t.hard, t.idle, t.grace} {
		if timer != nil {
			timer.Stop()
		}
	}
}

func (a *attemptActor) onTimeLimit(ctx actor.Context, msg timeLimitFired) {
	t := &a.timers
	if t.stopped || a.worker.exit != nil || a.tearingDown || a.timers.fired != nil || (msg.idle && msg.gen != t.idleGen) {
		return
	}
	code, why := failure.SandboxHardWallExceeded, fmt.Sprintf("the worker ran for %s (the hard wall)", t.limits.HardWall)
	if msg.idle {
		code, why = failure.SandboxIdleTimeout, fmt.Sprintf("the worker wrote no output for %s (the idle limit)", t.limits.Idle)
	}
	a.timers.fired = failure.New(code, "%s", why)
	a.emit(ctx, messages.FailureEvent(string(code),
		fmt.Sprintf("%s; the worker has %s to stop its task and write its output.", why, a.cfg.LimitGrace), nil))
	system, self := ctx.ActorSystem(), ctx.Self()
	t.grace = a.cfg.Clock.AfterFunc(a.cfg.LimitGrace, func() { system.Root.Send(self, timeLimitGraceOver{}) })
}

func (a *attemptActor) onTimeLimitGraceOver(ctx actor.Context) {
	if a.timers.stopped || a.worker.exit != nil || a.tearingDown {
		return
	}
	a.abort(ctx, a.timers.fired)
}
