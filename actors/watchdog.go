package actors

import (
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

// leaseWatchdog fires at the exact lease deadline read from the attempt's
// fence, with a timer re-armed whenever it starts (including after a
// restart); it never polls.
type leaseWatchdog struct {
	fence      *fence
	clock      Clock
	timer      Timer
	generation int
	armedFor   time.Time
	fired      bool
}

func newLeaseWatchdogProps(f *fence, clock Clock) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &leaseWatchdog{fence: f, clock: clock} })
}

func (w *leaseWatchdog) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		w.arm(ctx)
	case leaseRenewed:
		w.arm(ctx)
	case leaseTimerFired:
		if msg.generation != w.generation || w.fired {
			return
		}
		expiresAt := w.fence.expiry()
		if w.clock.Now().Before(expiresAt) {
			w.arm(ctx) // renewed since the timer was armed
			return
		}
		w.fired = true
		ctx.Send(ctx.Parent(), LeaseExpired{ExpiresAt: expiresAt})
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

// leaseRenewed tells the watchdog to re-arm from the fence.
type leaseRenewed struct{}

func (w *leaseWatchdog) arm(ctx actor.Context) {
	w.stop()
	w.generation++
	generation := w.generation
	w.armedFor = w.fence.expiry()
	system, self := ctx.ActorSystem(), ctx.Self()
	w.timer = w.clock.AfterFunc(w.armedFor.Sub(w.clock.Now()), func() {
		system.Root.Send(self, leaseTimerFired{generation: generation})
	})
}

func (w *leaseWatchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
