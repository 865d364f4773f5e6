package metrics

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forgedev/forged/messages"
)

// recentMessages is how many message kinds an actor's record keeps.
const recentMessages = 8

// timelinesKept bounds the attempts whose phase timeline (and memory
// series) is kept.
const timelinesKept = 64

// memorySamplesKept bounds the readings kept per attempt: at the default
// sample interval, the last minutes.
const memorySamplesKept = 600

// ActorStats is one live actor's counters, for the console (the API's,
// package messages).
type ActorStats = messages.ActorStats

// actorRecord is the counters of the actor spawned from one instrumented
// Props (each spawn instruments its own clone).
type actorRecord struct {
	depth, in, out, restarts atomic.Int64
	mu                       sync.Mutex
	recent                   []messages.MessageCount // least recently seen first
}

// polling reports the console's own polling messages, which the recent
// list leaves out.
func polling(msg any) bool {
	switch msg.(type) {
	case messages.Inspect, messages.SnapshotRequest:
		return true
	}
	return false
}

func (r *actorRecord) received(msg any) {
	if polling(msg) {
		return
	}
	name := fmt.Sprintf("%T", msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	count := uint64(0)
	if i := slices.IndexFunc(r.recent, func(c messages.MessageCount) bool { return c.Kind == name }); i >= 0 {
		count = r.recent[i].Count
		r.recent = slices.Delete(r.recent, i, i+1)
	} else if len(r.recent) == recentMessages {
		r.recent = slices.Delete(r.recent, 0, 1)
	}
	r.recent = append(r.recent, messages.MessageCount{Kind: name, Count: count + 1})
}

func (r *actorRecord) stats() ActorStats {
	r.mu.Lock()
	recent := append([]messages.MessageCount{}, r.recent...)
	r.mu.Unlock()
	return ActorStats{MailboxDepth: r.depth.Load(), MessagesIn: uint64(r.in.Load()), MessagesOut: uint64(r.out.Load()),
		Restarts: uint64(r.restarts.Load()), Recent: recent}
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
			delete(m.memory, m.timelineOrder[0])
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

// MemorySeries returns the attempt's memory readings (the last
// memorySamplesKept, for the attempts whose timeline is kept), and whether
// any was recorded.
func (m *Metrics) MemorySeries(attemptID string) (messages.MemorySeries, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	series, ok := m.memory[attemptID]
	if !ok {
		return messages.MemorySeries{AttemptID: attemptID, Samples: []messages.MemorySample{}}, false
	}
	series.Samples = append([]messages.MemorySample{}, series.Samples...)
	return series, true
}

// memorySampled keeps one reading; an attempt without a timeline (not
// admitted through the instrumented tree, or long gone) is not kept.
func (m *Metrics) memorySampled(msg messages.MemorySampled) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.timelines[msg.AttemptID]; !ok {
		return
	}
	series := m.memory[msg.AttemptID]
	series.AttemptID, series.LimitBytes = msg.AttemptID, msg.LimitBytes
	if len(series.Samples) == memorySamplesKept {
		series.Samples = slices.Delete(series.Samples, 0, 1)
	}
	series.Samples = append(series.Samples, msg.Sample)
	m.memory[msg.AttemptID] = series
}
