// Package actortest is the harness for testing forged's actors (and for
// other teams testing against them): a Probe is an actor that records every
// message it receives, with assertions that read like the behaviour they
// check:
//
//	probe := actortest.NewProbe(t, system)
//	system.Root.Send(supervisor, messages.SubmitAttempt{Dispatch: d, Subscriber: probe.PID()})
//	finished := actortest.Expect[messages.AttemptFinished](t, probe, 5*time.Second)
//	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 100*time.Millisecond)
//
// and a Spy records what an actor under test sends:
//
//	pid, spy := actortest.SpawnSpied(t, system, producer)
//	spy.ShouldSend(t).To(supervisor).Within(time.Second).Message(messages.ReleaseBuildPermit{})
package actortest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Probe records the messages sent to it.
type Probe struct {
	pid    *actor.PID
	system *actor.ActorSystem

	mu       sync.Mutex
	received []any
	signal   chan struct{}
}

// NewProbe spawns a probe; it is stopped when the test ends.
func NewProbe(t testing.TB, system *actor.ActorSystem) *Probe {
	t.Helper()
	p := &Probe{system: system, signal: make(chan struct{}, 1)}
	p.pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
			return
		}
		p.mu.Lock()
		p.received = append(p.received, ctx.Message())
		p.mu.Unlock()
		select {
		case p.signal <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(func() { system.Root.Stop(p.pid) })
	return p
}

// PID is the probe's address.
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

// Received returns a copy of the messages not yet taken by an expectation.
func (p *Probe) Received() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]any(nil), p.received...)
}

// waitFor waits until a message matching match arrives, or fails the test.
func (p *Probe) waitFor(t testing.TB, within time.Duration, what string, match func(any) bool) any {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if m, ok := p.take(match); ok {
			return m
		}
		select {
		case <-p.signal:
		case <-deadline.C:
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
