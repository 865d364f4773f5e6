package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/actortest"
)

// A (re)started watchdog knows only the dispatch's expiry: it must not
// fire on it before the attempt has told it the current one, which a
// renewal may have moved later. It shares no state with the attempt.
func TestWatchdogWaitsForTheAttemptsExpiryBeforeFiring(t *testing.T) {
	system := actortest.NewSystem(t)
	clk := system.Clock
	initial := clk.Now().Add(-time.Second) // already past
	renewed := clk.Now().Add(time.Hour)
	probe := system.NewProbe()
	asked := make(chan *actor.PID, 1)
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Spawn(newLeaseWatchdogProps(initial, clk))
		case watchdogStarted:
			asked <- ctx.Sender() // answered later, as a busy attempt would
		case LeaseExpired:
			ctx.Send(probe.PID(), msg)
		}
	}))
	watchdog := <-asked
	actortest.ExpectNoMessage[LeaseExpired](t, probe, time.Millisecond)

	system.Root.Send(watchdog, leaseRenewed{expiresAt: renewed})
	actortest.ExpectNoMessage[LeaseExpired](t, probe, 0)
	clk.Advance(time.Hour)
	got := actortest.Expect[LeaseExpired](t, probe, within)
	assert.Equal(t, renewed, got.ExpiresAt)
}

// Told nothing later, a watchdog whose deadline passed fires once the
// attempt confirms the expiry it already had.
func TestWatchdogFiresOnceTheAttemptConfirms(t *testing.T) {
	system := actortest.NewSystem(t)
	clk := system.Clock
	expiry := clk.Now().Add(time.Minute)
	probe := system.NewProbe()
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Spawn(newLeaseWatchdogProps(expiry, clk))
		case watchdogStarted:
			ctx.Respond(leaseRenewed{expiresAt: expiry})
		case LeaseExpired:
			ctx.Send(probe.PID(), msg)
		}
	}))
	assert.Eventually(t, func() bool {
		clk.Advance(time.Minute)
		return len(actortest.All[LeaseExpired](probe)) > 0
	}, within, 5*time.Millisecond)
	actortest.Expect[LeaseExpired](t, probe, within)
	actortest.ExpectNoMessage[LeaseExpired](t, probe, time.Hour) // it fires once
}
