package metrics

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/forgedev/forged/messages"
)

// KindOf names an actor's kind from its id: the last path segment without
// its "$n" suffix, "attempt" for "attempt-<id>", "anonymous" for "$n".
func KindOf(id string) string {
	last := id[strings.LastIndexByte(id, '/')+1:]
	if i := strings.IndexByte(last, '$'); i >= 0 {
		last = last[:i]
	}
	switch {
	case last == "":
		return "anonymous"
	case strings.HasPrefix(last, "attempt-"):
		return "attempt"
	}
	return last
}

// kind bounds the kind label: beyond maxKinds distinct kinds, "other".
func (m *Metrics) kind(k string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kinds[k] {
		return k
	}
	if len(m.kinds) >= maxKinds {
		return "other"
	}
	m.kinds[k] = true
	return k
}

// Instrument returns a clone of props whose actor is counted as kind: its
// mailbox depth and messages, what it sends, its restarts, and the domain
// messages it handles. Every actor it spawns is instrumented the same way,
// under the kind of its name. The actor gets the default unbounded
// mailbox, which is what every forged actor uses.
func (m *Metrics) Instrument(props *actor.Props, kind string) *actor.Props {
	kind = m.kind(kind)
	rec := &actorRecord{}
	return props.Clone(
		actor.WithMailbox(actor.Unbounded(&mailboxStats{m: m, kind: kind, rec: rec})),
		actor.WithReceiverMiddleware(m.receiveMiddleware(kind, rec)),
		actor.WithSenderMiddleware(m.sendMiddleware(kind, rec)),
		actor.WithContextDecorator(func(next actor.ContextDecoratorFunc) actor.ContextDecoratorFunc {
			return func(ctx actor.Context) actor.Context { return &spawnContext{Context: next(ctx), m: m} }
		}),
	)
}

// WatchDeadLetters counts the system's dead letters by the kind of their
// target, until the returned function is called.
func (m *Metrics) WatchDeadLetters(system *actor.ActorSystem) (stop func()) {
	sub := system.EventStream.Subscribe(func(evt any) {
		if dl, ok := evt.(*actor.DeadLetterEvent); ok && dl.PID != nil {
			m.deadLetters.WithLabelValues(m.kind(KindOf(dl.PID.GetId()))).Inc()
		}
	})
	return func() { system.EventStream.Unsubscribe(sub) }
}

// spawnContext instruments the children an actor spawns.
type spawnContext struct {
	actor.Context
	m *Metrics
}

func (c *spawnContext) Spawn(props *actor.Props) *actor.PID {
	return c.Context.Spawn(c.m.Instrument(props, "anonymous"))
}

func (c *spawnContext) SpawnPrefix(props *actor.Props, prefix string) *actor.PID {
	return c.Context.SpawnPrefix(c.m.Instrument(props, KindOf(prefix)), prefix)
}

func (c *spawnContext) SpawnNamed(props *actor.Props, id string) (*actor.PID, error) {
	return c.Context.SpawnNamed(c.m.Instrument(props, KindOf(id)), id)
}

// mailboxStats counts one actor's mailbox: posted and waiting messages.
type mailboxStats struct {
	m    *Metrics
	kind string
	rec  *actorRecord
}

func (s *mailboxStats) MailboxStarted() { s.m.actorsLive.WithLabelValues(s.kind).Inc() }
func (s *mailboxStats) MessagePosted(any) {
	s.m.messagesIn.WithLabelValues(s.kind).Inc()
	s.m.mailbox.WithLabelValues(s.kind).Inc()
	s.rec.in.Add(1)
	s.rec.depth.Add(1)
}
func (s *mailboxStats) MessageReceived(any) {
	s.m.mailbox.WithLabelValues(s.kind).Dec()
	s.rec.depth.Add(-1)
}
func (s *mailboxStats) MailboxEmpty() {}

func (m *Metrics) receiveMiddleware(kind string, rec *actorRecord) actor.ReceiverMiddleware {
	live := m.actorsLive.WithLabelValues(kind)
	restarts := m.restarts.WithLabelValues(kind)
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			m.received(kind, rec, ctx.Self(), env, live, restarts)
			next(ctx, env)
		}
	}
}

func (m *Metrics) received(kind string, rec *actorRecord, self *actor.PID, env *actor.MessageEnvelope, live prometheus.Gauge, restarts prometheus.Counter) {
	rec.received(env.Message)
	switch msg := env.Message.(type) {
	case *actor.Restarting:
		restarts.Inc()
		rec.restarts.Add(1)
	case *actor.Stopped:
		live.Dec()
		m.forget(self.GetId())
	case *actor.Started:
		m.mu.Lock()
		m.actors[self.GetId()] = rec
		m.mu.Unlock()
		if kind == "build" {
			m.buildStarted(self.GetId())
		}
	case messages.AttemptPhaseChanged:
		m.phaseChanged(msg.AttemptID, msg.Phase)
	case messages.MemorySampled:
		m.memorySampled(msg)
	case messages.AcquireBuildPermit:
		if env.Sender != nil {
			m.permitRequested(env.Sender.GetId())
		}
	}
}

func (m *Metrics) sendMiddleware(kind string, rec *actorRecord) actor.SenderMiddleware {
	sent := m.messagesOut.WithLabelValues(kind)
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			sent.Inc()
			rec.out.Add(1)
			switch msg := env.Message.(type) {
			case messages.BuildPermitGranted:
				m.permitGranted(target.GetId())
			case messages.BuildDone:
				result := "miss"
				if msg.CacheHit {
					result = "hit"
				}
				m.buildFinished(ctx.Self().GetId(), result)
			case messages.BuildFailed:
				m.buildFinished(ctx.Self().GetId(), "failed")
			}
			next(ctx, target, env)
		}
	}
}
