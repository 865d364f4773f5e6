package supervisor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
)

type panicNow struct{}

// startCounter counts its starts and panics on panicNow.
func startCounter(starts *atomic.Int32) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			starts.Add(1)
		case panicNow:
			panic("child failed on purpose")
		}
	})
}

type spawned struct{ reaper, attempt *actor.PID }

// The reaper is restarted after a panic (periodic reaping goes on); any
// other child (an attempt) is stopped, never restarted.
func TestRootStrategyRestartsTheReaperAndStopsAttempts(t *testing.T) {
	system := actortest.NewSystem(t)
	system.AllowFailures(func(reason any) bool { return reason == "child failed on purpose" })
	probe := system.NewProbe()
	var reaperStarts, attemptStarts atomic.Int32
	strategy := &rootStrategy{}
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			reaper := ctx.SpawnPrefix(startCounter(&reaperStarts), "reaper")
			strategy.reaper = reaper
			attempt := ctx.SpawnPrefix(startCounter(&attemptStarts), "attempt")
			ctx.Send(probe.PID(), spawned{reaper: reaper, attempt: attempt})
		case *actor.Terminated:
			ctx.Send(probe.PID(), msg)
		}
	}, actor.WithSupervisor(strategy)))
	kids := actortest.Expect[spawned](t, probe, within)

	for range reaperMaxRestarts {
		system.Root.Send(kids.reaper, panicNow{})
	}
	require.Eventually(t, func() bool { return reaperStarts.Load() == 1+reaperMaxRestarts }, within, 5*time.Millisecond)

	system.Root.Send(kids.attempt, panicNow{})
	gone := actortest.Expect[*actor.Terminated](t, probe, within)
	assert.True(t, gone.Who.Equal(kids.attempt), "the attempt is stopped")
	assert.Equal(t, int32(1), attemptStarts.Load(), "never restarted")

	// Beyond its bounds the reaper is stopped too (the root respawns it).
	system.Root.Send(kids.reaper, panicNow{})
	gone = actortest.Expect[*actor.Terminated](t, probe, within)
	assert.True(t, gone.Who.Equal(kids.reaper))
}
