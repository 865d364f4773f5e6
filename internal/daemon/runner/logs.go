package runner

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// DefaultLogLimit bounds the events kept per attempt.
const DefaultLogLimit = 10_000

// Retention of finished attempts: their logs (and outcomes) are kept for
// late readers, at most RetainFinished of them and none older than
// RetainFor. While an attempt is remembered, its id cannot be submitted
// again (attempt_duplicate), so its events never mix with another run's.
const (
	RetainFinished = 256
	RetainFor      = time.Hour
)

// Logs keeps each attempt's events and outcome so that clients can follow
// an attempt from its start even if they attach late.
type Logs struct {
	mu    sync.Mutex
	limit int
	now   func() time.Time
	byID  map[string]*Log
}

// NewLogs returns an empty set of logs keeping at most limit events each
// (0 means DefaultLogLimit).
func NewLogs(limit int) *Logs {
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	return &Logs{limit: limit, now: time.Now, byID: map[string]*Log{}}
}

// Get returns an attempt's log: running, or finished and still retained.
func (l *Logs) Get(attemptID string) (*Log, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked()
	log, ok := l.byID[attemptID]
	return log, ok
}

// Open starts the log of a new attempt (Runner.Submit does); false when
// the id is running or still remembered.
func (l *Logs) Open(attemptID string) (*Log, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked()
	if _, exists := l.byID[attemptID]; exists {
		return nil, false
	}
	log := &Log{id: attemptID, limit: l.limit, now: l.now, opened: l.now(), changed: make(chan struct{})}
	l.byID[attemptID] = log
	return log, true
}

// evictLocked forgets the finished attempts beyond the retention: those
// finished more than RetainFor ago, then the oldest beyond RetainFinished.
func (l *Logs) evictLocked() {
	type finished struct {
		id string
		at time.Time
	}
	var kept []finished
	cutoff := l.now().Add(-RetainFor)
	for id, log := range l.byID {
		at, done := log.finishedAt()
		switch {
		case !done:
		case at.Before(cutoff):
			delete(l.byID, id)
		default:
			kept = append(kept, finished{id, at})
		}
	}
	if len(kept) <= RetainFinished {
		return
	}
	slices.SortFunc(kept, func(a, b finished) int { return a.at.Compare(b.at) })
	for _, f := range kept[:len(kept)-RetainFinished] {
		delete(l.byID, f.id)
	}
}

// recordRestarted records the outcome of an attempt that a previous
// process was running when it died: it was torn down at start-up and is
// not run again.
func (l *Logs) recordRestarted(attemptID string, why reaper.AdoptVerdict) (messages.AttemptOutcome, bool) {
	log, ok := l.Open(attemptID)
	if !ok {
		return messages.AttemptOutcome{}, false
	}
	if why.Code == "" {
		why = reaper.AdoptVerdict{Code: reaper.CodeRunnerRestarted, Reason: "forged restarted while the attempt ran; its resources were reaped and it was not run again"}
	}
	out := messages.AttemptOutcome{
		AttemptID: attemptID, Status: messages.StatusFailed, Code: string(why.Code),
		Message: why.Reason, FinishedAt: time.Now().UTC(),
	}
	log.Finish(out)
	return out, true
}

// unfinished returns the ids of the attempts whose logs have no outcome.
func (l *Logs) unfinished() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, log := range l.byID {
		if _, outcome, _, _ := log.Read(0); outcome == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func (l *Logs) discard(attemptID string, log *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID[attemptID] == log {
		delete(l.byID, attemptID)
	}
}

// Attempt states a listing selects (the API's, package messages).
const (
	StateRunning  = messages.AttemptStateRunning  // admitted or queued, no outcome yet
	StateFinished = messages.AttemptStateFinished // an outcome, and still retained
	StateAll      = messages.AttemptStateAll
)

// AttemptSummary is one attempt in a listing (the API's, package
// messages).
type AttemptSummary = messages.AttemptSummary

// listed is a summary with the instant a listing sorts it by: when it
// finished (the retention's clock), else when it was submitted.
type listed struct {
	AttemptSummary
	sortAt time.Time
}

// List returns the attempts in state (StateRunning, StateFinished or
// StateAll), newest first (by finish, else by submission), at most limit
// of them (limit <= 0: all). Finished attempts are those still retained
// (RetainFinished, RetainFor).
func (l *Logs) List(state string, limit int) []AttemptSummary {
	l.mu.Lock()
	l.evictLocked()
	logs := make([]*Log, 0, len(l.byID))
	for _, log := range l.byID {
		logs = append(logs, log)
	}
	l.mu.Unlock()
	all := make([]listed, 0, len(logs))
	for _, log := range logs {
		s := log.summary()
		if state == StateAll || s.State == state {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, func(a, b listed) int {
		if c := b.sortAt.Compare(a.sortAt); c != 0 {
			return c
		}
		return strings.Compare(a.AttemptID, b.AttemptID)
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	out := make([]AttemptSummary, len(all))
	for i, s := range all {
		out[i] = s.AttemptSummary
	}
	return out
}

func (l *Log) summary() listed {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := listed{AttemptSummary: AttemptSummary{AttemptID: l.id, State: StateRunning, SubmittedAt: l.opened, Events: l.dropped + len(l.events)}, sortAt: l.opened}
	if l.outcome != nil {
		out := *l.outcome
		s.State, s.Outcome, s.sortAt = StateFinished, &out, l.finished
	}
	return s
}

// Log is one attempt's events and, once finished, its outcome.
type Log struct {
	mu       sync.Mutex
	id       string
	opened   time.Time // when it was submitted
	limit    int
	now      func() time.Time
	events   []messages.Event
	dropped  int
	outcome  *messages.AttemptOutcome
	finished time.Time     // when the outcome was recorded (retention)
	changed  chan struct{} // closed and replaced on every change
}

func (l *Log) finishedAt() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished, l.outcome != nil
}

// Read returns the events from index from on, the outcome if finished, and
// a channel closed at the next change. Events dropped by the bound are
// skipped.
func (l *Log) Read(from int) ([]messages.Event, *messages.AttemptOutcome, int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := max(from-l.dropped, 0)
	events := append([]messages.Event(nil), l.events[min(start, len(l.events)):]...)
	return events, l.outcome, l.dropped + len(l.events), l.changed
}

// Append records an event (the attempt's subscriber does), dropping the
// oldest beyond the log's limit.
func (l *Log) Append(ev messages.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) >= l.limit {
		l.events = l.events[1:]
		l.dropped++
	}
	l.events = append(l.events, ev)
	l.notifyLocked()
}

// Finish records the attempt's outcome; only the first counts.
func (l *Log) Finish(out messages.AttemptOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.outcome == nil {
		l.outcome = &out
		l.finished = l.now()
		l.notifyLocked()
	}
}

func (l *Log) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// subscriberProps returns an actor that records an attempt's events into
// log, counts its outcome, and stops once the attempt has finished.
func subscriberProps(log *Log, m *metrics.Metrics) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case messages.AttemptEvent:
			log.Append(msg.Event)
		case messages.AttemptFinished:
			log.Finish(msg.Outcome)
			m.Finished(msg.Outcome)
			ctx.Stop(ctx.Self())
		}
	})
}

// Wait blocks until the attempt has finished or ctx ends.
func (l *Log) Wait(ctx context.Context) (messages.AttemptOutcome, error) {
	for {
		_, outcome, _, changed := l.Read(0)
		if outcome != nil {
			return *outcome, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return messages.AttemptOutcome{}, ctx.Err()
		}
	}
}

// Events returns a copy of the events recorded so far.
func (l *Log) Events() []messages.Event {
	events, _, _, _ := l.Read(0)
	return events
}
