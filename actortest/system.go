package actortest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"go.uber.org/goleak"
)

// Epoch is where every System's manual clock starts: a fixed instant, so
// that timestamps in a test's output do not depend on when it ran.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultWithin is how long expectations wait by default: long enough for
// a loaded CI machine under -race, short enough to fail a hung test.
const DefaultWithin = 10 * time.Second

// System is an actor system bound to one test:
//
//   - its Clock is a manual clock at Epoch, to inject into every
//     timer-using actor (ExpectNoMessage advances it instead of sleeping);
//   - a dead letter (a user message sent to an actor that is gone) or a
//     failure that reaches a supervisor (an escaped panic) fails the test,
//     unless the test declared it expected with AllowDeadLetters or
//     AllowFailures, or the message implements
//     actor.IgnoreDeadLetterLogging (its sender declared a late delivery
//     harmless);
//   - at cleanup every actor it spawned is stopped, the system shut down,
//     and the goroutines started during the test and still running are
//     reported as leaks (go.uber.org/goleak).
//
// Tests using a System must not run in parallel with other tests of the
// same package: the leak check sees every goroutine of the process.
type System struct {
	*actor.ActorSystem
	// Clock is the test's manual clock.
	Clock *ManualClock

	t            testing.TB
	subscription *eventstream.Subscription
	leakOpts     []goleak.Option
	checkLeaks   bool
	settle       time.Duration

	mu           sync.Mutex
	spawned      []*actor.PID
	deadLetters  []*actor.DeadLetterEvent
	failures     []*actor.SupervisorEvent
	allowDead    []func(*actor.DeadLetterEvent) bool
	allowFailure []func(*actor.SupervisorEvent) bool
	closing      bool
}

// Option configures a System.
type Option func(*System)

// WithoutLeakCheck turns the goroutine leak check off (for a test that
// knowingly leaves a goroutine behind, such as one blocked in a fake).
func WithoutLeakCheck() Option { return func(s *System) { s.checkLeaks = false } }

// IgnoreGoroutines passes goleak options (IgnoreTopFunction, …) to the
// leak check.
func IgnoreGoroutines(opts ...goleak.Option) Option {
	return func(s *System) { s.leakOpts = append(s.leakOpts, opts...) }
}

// WithSettle sets the real-time window ExpectNoMessage leaves for messages
// caused by the timers it fired to arrive (default 25ms).
func WithSettle(d time.Duration) Option { return func(s *System) { s.settle = d } }

// WithClock makes the System use clk (a test's own manual clock, from
// NewManualClock) instead of a new one at Epoch.
func WithClock(clk *ManualClock) Option { return func(s *System) { s.Clock = clk } }

// NewSystem starts an actor system bound to t; see System.
func NewSystem(t testing.TB, opts ...Option) *System {
	t.Helper()
	s := &System{t: t, Clock: NewManualClock(Epoch), checkLeaks: true, settle: 25 * time.Millisecond}
	// Goroutines alive before the system are not the test's leaks.
	s.leakOpts = append(s.leakOpts, goleak.IgnoreCurrent())
	for _, opt := range opts {
		opt(s)
	}
	s.ActorSystem = actor.NewActorSystem(
		// The dead-letter log throttle keeps a goroutine for one interval
		// after a dead letter; a short one lets the leak check see it end.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(&testLogHandler{s: s, level: slog.LevelWarn})
		}))
	s.subscription = s.EventStream.Subscribe(s.observe)
	t.Cleanup(s.cleanup)
	return s
}

// observe records the dead letters and supervisor events of the system.
func (s *System) observe(evt any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	switch e := evt.(type) {
	case *actor.DeadLetterEvent:
		if isLifecycle(e.Message) {
			return
		}
		if _, late := e.Message.(actor.IgnoreDeadLetterLogging); late {
			return // the sender declared a late delivery harmless
		}
		for _, allow := range s.allowDead {
			if allow(e) {
				return
			}
		}
		s.deadLetters = append(s.deadLetters, e)
	case *actor.SupervisorEvent:
		for _, allow := range s.allowFailure {
			if allow(e) {
				return
			}
		}
		s.failures = append(s.failures, e)
	}
}

// isLifecycle reports the system messages whose dead letters are routine:
// stopping or watching an actor that already stopped.
func isLifecycle(m any) bool {
	switch m.(type) {
	case *actor.Stop, *actor.Watch, *actor.Unwatch, *actor.Terminated, *actor.PoisonPill, *actor.DeadLetterResponse:
		return true
	}
	return false
}

// AllowDeadLetters declares dead letters of type T (to anyone) expected:
// they no longer fail the test.
func AllowDeadLetters[T any](s *System) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowDead = append(s.allowDead, func(e *actor.DeadLetterEvent) bool { _, ok := e.Message.(T); return ok })
}

// AllowFailures declares the failures (panics reaching a supervisor)
// whose reason satisfies match expected: they no longer fail the test.
func (s *System) AllowFailures(match func(reason any) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowFailure = append(s.allowFailure, func(e *actor.SupervisorEvent) bool { return match(e.Reason) })
}

// Failures returns the unexpected failures recorded so far.
func (s *System) Failures() []*actor.SupervisorEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*actor.SupervisorEvent(nil), s.failures...)
}

// DeadLetters returns the unexpected dead letters recorded so far.
func (s *System) DeadLetters() []*actor.DeadLetterEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*actor.DeadLetterEvent(nil), s.deadLetters...)
}

// Spawn spawns props at the root and returns once the actor has handled
// its Started message (so the timers it sets there are set before the test
// advances the clock); the actor is stopped at cleanup. It changes props
// like Tap does.
func (s *System) Spawn(props *actor.Props) *actor.PID {
	s.t.Helper()
	return s.SpawnNamed(props, "")
}

// SpawnNamed is Spawn under name ("" for a generated one).
func (s *System) SpawnNamed(props *actor.Props, name string) *actor.PID {
	s.t.Helper()
	started := make(chan struct{})
	var once sync.Once
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, envelope *actor.MessageEnvelope) {
			next(c, envelope)
			if _, ok := envelope.Message.(*actor.Started); ok {
				once.Do(func() { close(started) })
			}
		}
	}))
	var pid *actor.PID
	if name == "" {
		pid = s.Root.Spawn(props)
	} else {
		var err error
		if pid, err = s.Root.SpawnNamed(props, name); err != nil {
			s.t.Fatalf("spawn %s: %v", name, err)
		}
	}
	s.track(pid)
	select {
	case <-started:
	case <-time.After(DefaultWithin):
		s.t.Fatalf("actortest: %s did not handle Started within %s", pid.GetId(), DefaultWithin)
	}
	return pid
}

func (s *System) track(pid *actor.PID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawned = append(s.spawned, pid)
}

// NewProbe spawns a probe on this system that knows the system's clock
// (ExpectNoMessage advances it); it is stopped at cleanup.
func (s *System) NewProbe() *Probe {
	p := newProbe(s.ActorSystem)
	p.system = s
	p.pid = s.Spawn(p.props())
	return p
}

// Request sends msg to pid and returns the reply, which must be of type T,
// within DefaultWithin; anything else fails the test.
func Request[T any](t testing.TB, s *System, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := s.Root.RequestFuture(pid, msg, DefaultWithin).Result()
	if err != nil {
		t.Fatalf("request %T to %s: %v", msg, pid.GetId(), err)
	}
	v, ok := res.(T)
	if !ok {
		var zero T
		t.Fatalf("request %T to %s: replied %T %+v, want %T", msg, pid.GetId(), res, res, zero)
	}
	return v
}

// Advance moves the clock by d and returns once the timers it fired have
// run (they have sent their messages).
func (s *System) Advance(d time.Duration) { s.Clock.AdvanceSync(d) }

// cleanup stops what the test spawned, then reports dead letters,
// failures and leaked goroutines.
func (s *System) cleanup() {
	s.t.Helper()
	s.mu.Lock()
	dead, failed := s.deadLetters, s.failures
	s.closing = true
	spawned := s.spawned
	s.mu.Unlock()

	for i := len(spawned) - 1; i >= 0; i-- {
		// Stopping waits for the actor's children to stop first.
		if err := s.Root.StopFuture(spawned[i]).Wait(); err != nil {
			s.t.Errorf("actortest: stopping %s at cleanup: %v", spawned[i].GetId(), err)
		}
	}
	s.EventStream.Unsubscribe(s.subscription)
	s.Shutdown()

	for _, e := range dead {
		s.t.Errorf("actortest: dead letter: %T %+v sent to %s (from %s)", e.Message, e.Message, e.PID.GetId(), e.Sender.GetId())
	}
	for _, e := range failed {
		s.t.Errorf("actortest: %s failed (%v) and its supervisor decided %v", e.Child.GetId(), e.Reason, e.Directive)
	}
	if s.checkLeaks && !s.t.Failed() {
		if err := goleak.Find(s.leakOpts...); err != nil {
			s.t.Errorf("actortest: goroutines left running at the end of the test: %v", err)
		}
	}
}

// testLogHandler writes the actor system's warnings to the test's log
// while the test runs (never after: a log after a test ended panics).
type testLogHandler struct {
	s     *System
	level slog.Level
	attrs []slog.Attr
}

func (h *testLogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *testLogHandler) Handle(_ context.Context, r slog.Record) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.closing {
		return nil
	}
	line := r.Message
	for _, a := range h.attrs {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		return true
	})
	h.s.t.Logf("actor system: %s %s", r.Level, line)
	return nil
}

func (h *testLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &testLogHandler{s: h.s, level: h.level, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *testLogHandler) WithGroup(string) slog.Handler { return h }
