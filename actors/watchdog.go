package actors

import (
	"github.com/forgedev/forged/internal/kit/clock"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

const kindWatchdog = "lease-watchdog"

// LeaseExpired is sent by the lease watchdog to the attempt when the lease
// deadline has passed.
type LeaseExpired struct {
	ExpiresAt time.Time
}

// leaseTimerFired is the watchdog's own timer message.
type leaseTimerFired struct{ generation int }

// leaseWatchdog fires at the exact lease deadline, on a timer re-armed at
// every renewal; it never polls. It shares nothing with the attempt: the
// expiry comes in messages (leaseRenewed), and a restarted watchdog asks
// the attempt for the current one (watchdogStarted) while it re-arms at the
// expiry it started with.
type leaseWatchdog struct {
	initial    time.Time // the dispatch's expiry
	expiresAt  time.Time // the latest expiry it knows
	confirmed  bool      // the attempt answered watchdogStarted
	due        bool      // the deadline passed before the attempt answered
	clk        clock.Clock
	timer      clock.Timer
	generation int
	armedFor   time.Time
	fired      bool
}

func newLeaseWatchdogProps(expiresAt time.Time, clk clock.Clock) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &leaseWatchdog{initial: expiresAt, clk: clk} })
}

// watchdogStarted is the watchdog's request, at every start, for the
// attempt's current expiry; the attempt answers with leaseRenewed.
type watchdogStarted struct{}

// leaseRenewed tells the watchdog the lease's current expiry.
type leaseRenewed struct{ expiresAt time.Time }

func (w *leaseWatchdog) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if w.expiresAt.IsZero() {
			w.expiresAt = w.initial
		}
		w.arm(ctx)
		if parent := ctx.Parent(); parent != nil {
			ctx.Request(parent, watchdogStarted{})
		}
	case leaseRenewed:
		w.confirmed = true
		if msg.expiresAt.After(w.expiresAt) {
			w.expiresAt = msg.expiresAt
			w.due = false
			w.arm(ctx)
		} else if w.due {
			w.expire(ctx)
		}
	case leaseTimerFired:
		if msg.generation != w.generation || w.fired {
			return
		}
		switch {
		case w.clk.Now().Before(w.expiresAt):
			w.arm(ctx) // a timer that fired early
		case !w.confirmed:
			w.due = true // a restarted watchdog may not know the latest renewal yet
		default:
			w.expire(ctx)
		}
	case *actor.Restarting, *actor.Stopping:
		w.stop()
	case messages.Inspect:
		phase := "armed"
		if w.fired {
			phase = "fired"
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindWatchdog, Phase: phase,
			Facts: map[string]string{"expiresAt": w.armedFor.Format(time.RFC3339Nano)}})
	}
}

func (w *leaseWatchdog) expire(ctx actor.Context) {
	if w.fired {
		return
	}
	w.fired = true
	ctx.Send(ctx.Parent(), LeaseExpired{ExpiresAt: w.expiresAt})
}

func (w *leaseWatchdog) arm(ctx actor.Context) {
	w.stop()
	w.generation++
	generation := w.generation
	w.armedFor = w.expiresAt
	system, self := ctx.ActorSystem(), ctx.Self()
	w.timer = w.clk.AfterFunc(w.armedFor.Sub(w.clk.Now()), func() {
		system.Root.Send(self, leaseTimerFired{generation: generation})
	})
}

func (w *leaseWatchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
