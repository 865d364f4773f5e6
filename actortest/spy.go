package actortest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Sent is one message an actor under test sent.
type Sent struct {
	To      *actor.PID
	Message any
}

// Spy records every message an actor sends (through its sender
// middleware), for assertions that read like the behaviour they check:
//
//	pid, spy := actortest.SpawnSpied(t, system, producer)
//	spy.ShouldSend(t).To(supervisor).Within(time.Second).Message(messages.ReleaseBuildPermit{})
type Spy struct {
	mu     sync.Mutex
	sent   []Sent
	signal chan struct{}
}

// SpyOn adds to props a sender middleware that records every message the
// actor sends, and returns the Spy. It changes props (Proto.Actor props
// are mutable): use props built for this one actor, as forged's Props
// functions build them.
func SpyOn(props *actor.Props) *Spy {
	spy := &Spy{signal: make(chan struct{}, 1)}
	record := func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, envelope *actor.MessageEnvelope) {
			spy.mu.Lock()
			spy.sent = append(spy.sent, Sent{To: target, Message: envelope.Message})
			spy.mu.Unlock()
			select {
			case spy.signal <- struct{}{}:
			default:
			}
			next(c, target, envelope)
		}
	}
	props.Configure(actor.WithSenderMiddleware(record))
	return spy
}

// Tap adds to props a receiver middleware that records every user message
// the actor receives into a Probe (whose PID is nil: the probe is not an
// actor, the tapped actor is), for Expect, FishFor and the rest. Like
// SpyOn it changes props.
func Tap(props *actor.Props) *Probe {
	p := newProbe(nil)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, envelope *actor.MessageEnvelope) {
			p.record(envelope.Message)
			next(c, envelope)
		}
	}))
	return p
}

// SpawnSpied spawns the actor made by producer with opts, plus a sender
// middleware that records what it sends. The props are built here, never
// shared, so no other actor is affected. The actor is stopped when the
// test ends.
func SpawnSpied(t testing.TB, system *actor.ActorSystem, producer actor.Producer, opts ...actor.PropsOption) (*actor.PID, *Spy) {
	t.Helper()
	props := actor.PropsFromProducer(producer, opts...)
	spy := SpyOn(props)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { system.Root.Stop(pid) })
	return pid, spy
}

// Sent returns a copy of everything recorded so far.
func (s *Spy) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// SendExpectation is a fluent assertion on what the spied actor sends.
type SendExpectation struct {
	t      testing.TB
	spy    *Spy
	to     *actor.PID
	within time.Duration
}

// ShouldSend starts an expectation; by default it waits one second.
func (s *Spy) ShouldSend(t testing.TB) *SendExpectation {
	return &SendExpectation{t: t, spy: s, within: time.Second}
}

// To restricts the expectation to messages sent to pid.
func (e *SendExpectation) To(pid *actor.PID) *SendExpectation {
	e.to = pid
	return e
}

// Within sets how long to wait for the message.
func (e *SendExpectation) Within(d time.Duration) *SendExpectation {
	e.within = d
	return e
}

// Message asserts that a message equal to want (reflect.DeepEqual) is sent.
func (e *SendExpectation) Message(want any) {
	e.t.Helper()
	e.Matching(fmt.Sprintf("%T %+v", want, want), func(m any) bool { return reflect.DeepEqual(m, want) })
}

// Matching asserts that a message satisfying match is sent; what describes
// it in the failure.
func (e *SendExpectation) Matching(what string, match func(any) bool) {
	e.t.Helper()
	deadline := time.NewTimer(e.within)
	defer deadline.Stop()
	for {
		for _, s := range e.spy.Sent() {
			if (e.to == nil || s.To.Equal(e.to)) && match(s.Message) {
				return
			}
		}
		select {
		case <-e.spy.signal:
		case <-deadline.C:
			target := "anyone"
			if e.to != nil {
				target = e.to.GetId()
			}
			e.t.Fatalf("expected a send of %s to %s within %s; sent: %s", what, target, e.within, describeSent(e.spy.Sent()))
			return
		}
	}
}

func describeSent(sent []Sent) string {
	return describeList(sent, func(s Sent) string { return fmt.Sprintf("%T→%s", s.Message, s.To.GetId()) })
}
