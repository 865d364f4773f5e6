// Package actortest is the harness for testing forged's actors, and for
// other teams testing their actors against forged's messages, supervisor
// and attempt tree (Akka TestKit's probes and manual scheduler, ergo's
// fluent send assertions, Proto.Actor .NET's middleware probes).
//
// A System is an actor system bound to one test: a manual clock, dead
// letters and escaped panics fail the test, leaked goroutines are found at
// cleanup:
//
//	sys := actortest.NewSystem(t)
//	probe := sys.NewProbe()
//	sup := sys.Spawn(supervisor.Props(supervisor.Config{Clock: sys.Clock, …}))
//	sys.Root.Send(sup, messages.SubmitAttempt{Dispatch: d, Subscriber: probe.PID()})
//	finished := actortest.Expect[messages.AttemptFinished](t, probe, actortest.DefaultWithin)
//	actortest.ExpectNoMessage[messages.AttemptFinished](t, probe, time.Hour) // virtual time
//
// A Probe records messages, sent to it or (Tap) received by any actor
// whose Props it is attached to: Expect, ExpectWhere, FishFor,
// ExpectNoMessage, All and Probe.Within read them; Probe.Sync waits until
// everything sent to the probe so far is recorded. A Spy (SpyOn, on any
// Props) records what an actor sends:
//
//	spy := actortest.SpyOn(props)
//	spy.ShouldSend(t).To(supervisor).Within(time.Second).Message(messages.ReleaseBuildPermit{})
//
// Package fakeengine, beside this one, is a Docker Engine for the real
// engine client to talk to, and package scenario runs whole attempts on it.
package actortest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Probe records messages: those sent to it (NewProbe, System.NewProbe),
// or those an actor under test receives (Tap).
type Probe struct {
	pid    *actor.PID
	actors *actor.ActorSystem
	system *System // nil for a probe on a bare actor system

	mu       sync.Mutex
	received []any
	signal   chan struct{}
	deadline time.Time // set by Within
}

func newProbe(system *actor.ActorSystem) *Probe {
	return &Probe{actors: system, signal: make(chan struct{}, 1)}
}

// syncMark is Sync's sentinel: the probe closes reached when it gets to
// it, after every message queued before it.
type syncMark struct{ reached chan struct{} }

// record appends a message and wakes a waiting expectation.
func (p *Probe) record(m any) {
	switch m := m.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	case syncMark:
		close(m.reached)
		return
	}
	p.mu.Lock()
	p.received = append(p.received, m)
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *Probe) props() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) { p.record(ctx.Message()) })
}

// NewProbe spawns a probe on a bare actor system; it is stopped when the
// test ends. System.NewProbe is the same on a test System, whose clock
// ExpectNoMessage then advances.
func NewProbe(t testing.TB, system *actor.ActorSystem) *Probe {
	t.Helper()
	p := newProbe(system)
	p.pid = system.Root.Spawn(p.props())
	t.Cleanup(func() { system.Root.Stop(p.pid) })
	return p
}

// PID is the probe's address (nil for a Tap, which is not an actor).
func (p *Probe) PID() *actor.PID { return p.pid }

// take removes and returns the first received message matching match.
func (p *Probe) take(match func(any) bool) (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.received {
		if match(m) {
			p.received = append(p.received[:i], p.received[i+1:]...)
			return m, true
		}
	}
	return nil, false
}

// Sync returns once the probe has recorded every message sent to it
// before the call: it sends a sentinel through the probe's own mailbox,
// which is first in, first out, and waits for the probe to reach it. Call
// it before reading Received or All after sending, instead of sleeping or
// polling: what was sent is then all there. It waits at most DefaultWithin
// (or to an enclosing Within's deadline), and fails the test if the probe
// has not got there by then. A Tap has no mailbox of its own: Sync on a
// Tap fails the test.
func (p *Probe) Sync(t testing.TB) {
	t.Helper()
	if p.pid == nil {
		t.Fatalf("probe: Sync needs a probe that is an actor (NewProbe); a Tap has no mailbox of its own")
		return
	}
	mark := syncMark{reached: make(chan struct{})}
	within := p.bound(DefaultWithin)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	p.actors.Root.Send(p.pid, mark)
	select {
	case <-mark.reached:
	case <-deadline.C:
		t.Fatalf("probe: the messages sent before Sync were not all recorded within %s", within)
	}
}

// Received returns a copy of the messages not yet taken by an expectation.
func (p *Probe) Received() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]any(nil), p.received...)
}

// bound shortens within to the deadline of an enclosing Within.
func (p *Probe) bound(within time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.deadline.IsZero() {
		if left := time.Until(p.deadline); left < within {
			return max(left, 0)
		}
	}
	return within
}

// waitFor waits until a message matching match arrives, or fails the test.
func (p *Probe) waitFor(t testing.TB, within time.Duration, what string, match func(any) bool) any {
	t.Helper()
	within = p.bound(within)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if m, ok := p.take(match); ok {
			return m
		}
		select {
		case <-p.signal:
		case <-deadline.C:
			if m, ok := p.take(match); ok {
				return m
			}
			t.Fatalf("probe: expected %s within %s; received %s", what, within, describe(p.Received()))
			return nil
		}
	}
}

// Expect waits for the first message of type T (skipping others, which stay
// recorded) and returns it.
func Expect[T any](t testing.TB, p *Probe, within time.Duration) T {
	t.Helper()
	var zero T
	m := p.waitFor(t, within, fmt.Sprintf("a %T", zero), func(m any) bool { _, ok := m.(T); return ok })
	return m.(T)
}

// ExpectWhere waits for a message of type T satisfying pred.
func ExpectWhere[T any](t testing.TB, p *Probe, within time.Duration, pred func(T) bool) T {
	t.Helper()
	var zero T
	m := p.waitFor(t, within, fmt.Sprintf("a matching %T", zero), func(m any) bool {
		v, ok := m.(T)
		return ok && pred(v)
	})
	return m.(T)
}

// FishFor consumes the probe's messages of type T in arrival order until
// done returns true for one, which it returns; the messages of type T
// fished before it are dropped (Akka's fishForMessage), other types stay
// recorded. It fails the test if none is done within.
func FishFor[T any](t testing.TB, p *Probe, within time.Duration, done func(T) bool) T {
	t.Helper()
	var zero T
	within = p.bound(within)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if v, ok := fish(p, done); ok {
			return v
		}
		select {
		case <-p.signal:
		case <-deadline.C:
			if v, ok := fish(p, done); ok {
				return v
			}
			t.Fatalf("probe: expected a %T ending the fishing within %s; left: %s", zero, within, describe(p.Received()))
			return zero
		}
	}
}

// fish drops every T that done refuses, up to and including the first it
// accepts, which it returns.
func fish[T any](p *Probe, done func(T) bool) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := make([]any, 0, len(p.received))
	for i, m := range p.received {
		v, ok := m.(T)
		if !ok {
			kept = append(kept, m)
			continue
		}
		if done(v) {
			p.received = append(kept, p.received[i+1:]...)
			return v, true
		}
	}
	p.received = kept
	var zero T
	return zero, false
}

// ExpectNoMessage asserts that no message of type T arrives while d passes.
// On a System's probe, d passes on the system's manual clock: it is
// advanced by d (firing the timers due), and the messages those timers
// cause get the system's settle window to arrive. On a bare probe it is a
// wall-clock wait.
func ExpectNoMessage[T any](t testing.TB, p *Probe, d time.Duration) {
	t.Helper()
	if p.system == nil {
		ShouldReceiveNothing[T](t, p, d)
		return
	}
	p.system.Advance(d)
	ShouldReceiveNothing[T](t, p, p.system.settle)
}

// Within runs f, in which the probe's expectations wait at most until max
// has passed since Within began, and fails the test if f took longer than
// max (Akka's within).
func (p *Probe) Within(t testing.TB, max time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	p.mu.Lock()
	outer := p.deadline
	p.deadline = start.Add(max)
	if !outer.IsZero() && outer.Before(p.deadline) {
		p.deadline = outer
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.deadline = outer
		p.mu.Unlock()
	}()
	f()
	if took := time.Since(start); took > max {
		t.Fatalf("probe: expected the block to finish within %s, it took %s", max, took)
	}
}

// All returns, without waiting, every recorded message of type T.
func All[T any](p *Probe) []T {
	var out []T
	for _, m := range p.Received() {
		if v, ok := m.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// ShouldReceiveNothing asserts no message of type T arrives within d.
func ShouldReceiveNothing[T any](t testing.TB, p *Probe, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	if got := All[T](p); len(got) > 0 {
		var zero T
		t.Fatalf("probe: expected no %T, received %v", zero, got)
	}
}

func describe(ms []any) string {
	return describeList(ms, func(m any) string { return fmt.Sprintf("%T", m) })
}

// describeList renders at most eight items for a failure message.
func describeList[T any](items []T, render func(T) string) string {
	if len(items) == 0 {
		return "nothing"
	}
	out := ""
	for i, item := range items {
		if i == 8 {
			return out + fmt.Sprintf(" … (%d more)", len(items)-i)
		}
		if i > 0 {
			out += ", "
		}
		out += render(item)
	}
	return out
}
