package actortest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actortest"
)

// exampleT stands in for the *testing.T a real test has: it prints what
// would fail the test, so that the examples' output shows it.
type exampleT struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (t *exampleT) Helper()             {}
func (t *exampleT) Failed() bool        { return t.failed }
func (t *exampleT) Cleanup(f func())    { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Logf(string, ...any) {}
func (t *exampleT) Fatalf(f string, a ...any) {
	t.Errorf(f, a...)
	panic("the example failed")
}
func (t *exampleT) Errorf(f string, a ...any) {
	t.failed = true
	fmt.Printf("FAIL: "+f+"\n", a...)
}

// end runs the cleanups, as the end of a test does.
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// remind tells its subscriber "time's up" once d has passed on clk.
type remind struct {
	clk        actortest.Clock
	d          time.Duration
	subscriber *actor.PID
	timer      actortest.Timer
}

type timeIsUp struct{ At time.Time }

func (r *remind) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		self, system := ctx.Self(), ctx.ActorSystem()
		r.timer = r.clk.AfterFunc(r.d, func() { system.Root.Send(self, timeIsUp{}) })
	case timeIsUp:
		ctx.Send(r.subscriber, timeIsUp{At: r.clk.Now()})
	case *actor.Stopping:
		r.timer.Stop()
	}
}

// A System runs on a manual clock: a timer-using actor given sys.Clock
// fires when the test advances the clock, never on the wall clock.
// ExpectNoMessage lets virtual time pass.
func ExampleNewSystem() {
	t := &exampleT{}
	defer t.end()
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	sys.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &remind{clk: sys.Clock, d: time.Hour, subscriber: probe.PID()}
	}))

	actortest.ExpectNoMessage[timeIsUp](t, probe, 59*time.Minute)
	sys.Advance(time.Minute)
	up := actortest.Expect[timeIsUp](t, probe, time.Second)
	fmt.Println("time is up at", up.At.Sub(actortest.Epoch))
	// Output: time is up at 1h0m0s
}

// FishFor skips the messages that do not end the wait (here, progress
// below 100%) and returns the one that does.
func ExampleFishFor() {
	t := &exampleT{}
	defer t.end()
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	for _, pct := range []int{10, 50, 100} {
		sys.Root.Send(probe.PID(), pct)
	}
	probe.Sync(t) // the three are recorded: All below counts them all
	done := actortest.FishFor(t, probe, time.Second, func(pct int) bool { return pct == 100 })
	fmt.Println(done, "left:", len(actortest.All[int](probe)))
	// Output: 100 left: 0
}

// Tap and SpyOn attach to the props of any actor: Tap records what it
// receives, SpyOn what it sends.
func ExampleTap() {
	t := &exampleT{}
	defer t.end()
	sys := actortest.NewSystem(t)
	echo := actor.PropsFromFunc(func(ctx actor.Context) {
		if s, ok := ctx.Message().(string); ok && ctx.Sender() != nil {
			ctx.Respond("echo: " + s)
		}
	})
	received := actortest.Tap(echo)
	spy := actortest.SpyOn(echo)
	pid := sys.Spawn(echo)

	reply := actortest.Request[string](t, sys, pid, "hello")
	fmt.Println(actortest.Expect[string](t, received, time.Second), "→", reply)
	spy.ShouldSend(t).Message("echo: hello")
	// Output: hello → echo: hello
}

// A dead letter fails the test that caused it.
func ExampleSystem_deadLetter() {
	t := &exampleT{}
	sys := actortest.NewSystem(t)
	gone := sys.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "gone")
	if err := sys.Root.StopFuture(gone).Wait(); err != nil {
		panic(err)
	}
	sys.Root.Send(gone, "anyone there?")
	t.end()
	fmt.Println("failed:", t.failed)
	// Output:
	// FAIL: actortest: dead letter: string anyone there? sent to gone (from )
	// failed: true
}
