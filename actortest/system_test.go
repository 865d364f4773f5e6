package actortest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
)

// innerT is a test inside the test: it records what would fail it.
type innerT struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (t *innerT) Helper()             {}
func (t *innerT) Logf(string, ...any) {}
func (t *innerT) Cleanup(f func())    { t.cleanups = append(t.cleanups, f) }
func (t *innerT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.errors) > 0
}
func (t *innerT) Errorf(f string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errors = append(t.errors, fmt.Sprintf(f, a...))
}
func (t *innerT) Fatalf(f string, a ...any) {
	t.Errorf(f, a...)
	runtime.Goexit()
}

// runInner runs body as a test of its own (cleanups included) and returns
// what failed it.
func runInner(outer *testing.T, body func(t *innerT)) []string {
	t := &innerT{TB: outer}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(t.cleanups) - 1; i >= 0; i-- {
				t.cleanups[i]()
			}
		}()
		body(t)
	}()
	<-done
	return t.errors
}

func failedWith(errs []string, part string) bool {
	for _, e := range errs {
		if strings.Contains(e, part) {
			return true
		}
	}
	return false
}

type boom struct{}

func panicker() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(boom); ok {
			panic("on purpose")
		}
	})
}

func TestACleanTestPasses(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		probe := sys.NewProbe()
		sys.Root.Send(probe.PID(), "hi")
		actortest.Expect[string](t, probe, time.Second)
	})
	assert.Empty(t, errs)
}

func TestAnEscapedPanicFailsTheTest(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		pid := sys.Spawn(panicker())
		sys.Root.Send(pid, boom{})
		require.Eventually(t, func() bool { return len(sys.Failures()) == 1 }, time.Second, time.Millisecond)
	})
	assert.True(t, failedWith(errs, "on purpose"), "%q", errs)
}

func TestAnExpectedPanicDoesNot(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		sys.AllowFailures(func(reason any) bool { return reason == "on purpose" })
		pid := sys.Spawn(panicker())
		sys.Root.Send(pid, boom{})
		// The actor is restarted by the root's default strategy and goes on.
		assert.Equal(t, "ok", actortest.Request[string](t, sys, sys.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(string); ok {
				ctx.Respond("ok")
			}
		})), "?"))
	})
	assert.Empty(t, errs)
}

func TestADeadLetterFailsTheTestUnlessAllowed(t *testing.T) {
	send := func(t *innerT, allow bool) {
		sys := actortest.NewSystem(t)
		if allow {
			actortest.AllowDeadLetters[string](sys)
		}
		gone := sys.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		require.NoError(t, sys.Root.StopFuture(gone).Wait())
		sys.Root.Send(gone, "late")
		sys.Root.Stop(gone) // stopping what stopped is routine, never reported
	}
	errs := runInner(t, func(t *innerT) { send(t, false) })
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "dead letter: string late")
	assert.Empty(t, runInner(t, func(t *innerT) { send(t, true) }))
}

func TestALeakedGoroutineFailsTheTest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	errs := runInner(t, func(t *innerT) {
		actortest.NewSystem(t)
		go func() { <-release }()
	})
	assert.True(t, failedWith(errs, "goroutines left running"), "%q", errs)
}

func TestExpectNoMessageLetsVirtualTimePass(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		probe := sys.NewProbe()
		sys.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &remind{clk: sys.Clock, d: time.Hour, subscriber: probe.PID()}
		}))
		start := time.Now()
		actortest.ExpectNoMessage[timeIsUp](t, probe, 59*time.Minute)
		assert.Less(t, time.Since(start), time.Minute, "no wall-clock wait")
		actortest.ExpectNoMessage[timeIsUp](t, probe, time.Minute) // the reminder arrives: fails
	})
	assert.True(t, failedWith(errs, "expected no actortest_test.timeIsUp"), "%q", errs)
}

func TestFishForDropsTheRefusedAndKeepsOtherTypes(t *testing.T) {
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	for _, m := range []any{1, "keep", 2, 3, 4} {
		sys.Root.Send(probe.PID(), m)
	}
	probe.Sync(t) // all five are recorded: Received below sees the 4
	assert.Equal(t, 3, actortest.FishFor(t, probe, time.Second, func(n int) bool { return n == 3 }))
	assert.Equal(t, []any{"keep", 4}, probe.Received())
}

func TestSyncWaitsForEverythingSentBefore(t *testing.T) {
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	const n = 2000
	senders := sys.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if to, ok := ctx.Message().(*actor.PID); ok {
			for i := range n {
				ctx.Send(to, i)
			}
			ctx.Respond(true)
		}
	}))
	// Sent by another actor, all of it before Sync is called.
	require.True(t, actortest.Request[bool](t, sys, senders, probe.PID()))
	for i := range n {
		sys.Root.Send(probe.PID(), -i)
	}
	probe.Sync(t)
	assert.Len(t, actortest.All[int](probe), 2*n)
	assert.Len(t, probe.Received(), 2*n, "the sentinel is never recorded")
}

func TestSyncOnATapFailsTheTest(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		actortest.Tap(actor.PropsFromFunc(func(actor.Context) {})).Sync(t)
	})
	assert.True(t, failedWith(errs, "a Tap has no mailbox"), "%q", errs)
}

func TestWithinBoundsTheExpectationsInside(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		probe := sys.NewProbe()
		probe.Within(t, 20*time.Millisecond, func() {
			actortest.Expect[string](t, probe, time.Hour) // nothing comes: fails at 20ms, not in an hour
		})
	})
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[0], "expected a string within")
	assert.NotContains(t, errs[0], "1h0m0s")
}

func TestTapSeesWhatTheActorReceives(t *testing.T) {
	sys := actortest.NewSystem(t)
	props := actor.PropsFromFunc(func(actor.Context) {})
	tap := actortest.Tap(props)
	pid := sys.Spawn(props)
	sys.Root.Send(pid, "one")
	sys.Root.Send(pid, "two")
	assert.Equal(t, "one", actortest.Expect[string](t, tap, time.Second))
	assert.Equal(t, "two", actortest.Expect[string](t, tap, time.Second))
	assert.Nil(t, tap.PID())
}

// lateResult is a message whose sender declares a late delivery harmless.
type lateResult struct{}

func (lateResult) IgnoreDeadLetterLogging() {}

func TestADeclaredLateDeliveryIsNotADeadLetter(t *testing.T) {
	errs := runInner(t, func(t *innerT) {
		sys := actortest.NewSystem(t)
		gone := sys.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		require.NoError(t, sys.Root.StopFuture(gone).Wait())
		sys.Root.Send(gone, lateResult{})
	})
	assert.Empty(t, errs)
}
