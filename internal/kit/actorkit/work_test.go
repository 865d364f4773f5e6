package actorkit

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkCountsEveryGoUntilItReturns: the tracked work outlives its actor
// (as a teardown does), and Idle closes only once every goroutine is done.
func TestWorkCountsEveryGoUntilItReturns(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	work := TrackWork(system)
	select {
	case <-work.Idle():
	default:
		t.Fatal("a system that ran nothing is idle")
	}

	release := make(chan struct{})
	started := make(chan struct{}, 2)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			for range 2 {
				Go(ctx, context.WithoutCancel(context.Background()), "teardown", func(context.Context) any {
					started <- struct{}{}
					<-release
					return nil
				})
			}
			Go(ctx, context.Background(), "quick", func(context.Context) any { return nil })
		}
	}))
	<-started
	<-started
	require.NoError(t, system.Root.StopFuture(pid).Wait())

	idle := work.Idle()
	select {
	case <-idle:
		t.Fatal("idle while two teardowns still run")
	default:
	}
	assert.Contains(t, work.Running(), "teardown ×2")
	close(release)
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running: %s", work.Running())
	}
	assert.Empty(t, work.Running())
}

func TestGoWithoutTrackingCountsNothing(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	assert.Nil(t, workOf(system))
	done := make(chan struct{})
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			Go(ctx, context.Background(), "untracked", func(context.Context) any { close(done); return nil })
		}
	}))
	<-done
}
