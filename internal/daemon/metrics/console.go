package metrics

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forgedev/forged/messages"
)

// recentMessages is how many message types an actor's record keeps.
const recentMessages = 8

// timelinesKept bounds the attempts whose phase timeline is kept.
const timelinesKept = 64

// ActorStats is one live actor's counters, for the console (the API's,
// package messages).
type ActorStats = messages.ActorStats

// actorRecord is the counters of the actor spawned from one instrumented
// Props (each spawn instruments its own clone).
type actorRecord struct {
	depth, in, out, restarts atomic.Int64
	mu                       sync.Mutex
	recent                   []string
}

func (r *actorRecord) received(msg any) {
	name := fmt.Sprintf("%T", msg)
	r.mu.Lock()
	if len(r.recent) == recentMessages {
		copy(r.recent, r.recent[1:])
		r.recent = r.recent[:recentMessages-1]
	}
	r.recent = append(r.recent, name)
	r.mu.Unlock()
}

func (r *actorRecord) stats() ActorStats {
	r.mu.Lock()
	recent := append([]string{}, r.recent...)
	r.mu.Unlock()
	return ActorStats{MailboxDepth: r.depth.Load(), MessagesIn: uint64(r.in.Load()), MessagesOut: uint64(r.out.Load()),
		Restarts: uint64(r.restarts.Load()), RecentMessages: recent}
}

// ActorStats returns the counters of the live actor pid.
func (m *Metrics) ActorStats(pid string) (ActorStats, bool) {
	m.mu.Lock()
	rec, ok := m.actors[pid]
	m.mu.Unlock()
	if !ok {
		return ActorStats{}, false
	}
	return rec.stats(), true
}

// PhaseSpan is one phase of an attempt's timeline (the API's, package
// messages).
type PhaseSpan = messages.PhaseSpan

// Timeline returns the phases the attempt went through (the last
// timelinesKept attempts are kept).
func (m *Metrics) Timeline(attemptID string) []PhaseSpan {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]PhaseSpan(nil), m.timelines[attemptID]...)
}

// recordPhaseLocked appends a phase to the attempt's timeline, closing the
// previous span; phase "" only closes it.
func (m *Metrics) recordPhaseLocked(attemptID, phase string, now time.Time) {
	spans, ok := m.timelines[attemptID]
	if !ok {
		if phase == "" {
			return
		}
		m.timelineOrder = append(m.timelineOrder, attemptID)
		if len(m.timelineOrder) > timelinesKept {
			delete(m.timelines, m.timelineOrder[0])
			m.timelineOrder = m.timelineOrder[1:]
		}
	}
	if n := len(spans); n > 0 && spans[n-1].Seconds == 0 {
		spans[n-1].Seconds = max(now.Sub(spans[n-1].Start).Seconds(), 1e-9)
	}
	if phase != "" {
		spans = append(spans, PhaseSpan{Phase: phase, Start: now})
	}
	m.timelines[attemptID] = spans
}
