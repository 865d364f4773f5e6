package runner

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// fakeNow is a settable clock for the retention.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func logID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func TestFinishedAttemptIsRememberedThenForgotten(t *testing.T) {
	clock := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := NewLogs(0)
	logs.now = clock.now
	log, ok := logs.Open(logID(1))
	require.True(t, ok)
	_, ok = logs.Open(logID(1))
	assert.False(t, ok, "a running attempt's id is refused")

	log.Finish(messages.AttemptOutcome{AttemptID: logID(1), Status: messages.StatusSucceeded})
	_, ok = logs.Open(logID(1))
	assert.False(t, ok, "a finished attempt's id is refused while it is remembered")
	got, ok := logs.Get(logID(1))
	require.True(t, ok)
	assert.Same(t, log, got, "its events answer with its own outcome")

	clock.advance(RetainFor + time.Second)
	_, ok = logs.Get(logID(1))
	assert.False(t, ok, "forgotten after the retention age")
	_, ok = logs.Open(logID(1))
	assert.True(t, ok)
}

func TestFinishedAttemptsAreBoundedByCount(t *testing.T) {
	clock := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := NewLogs(0)
	logs.now = clock.now
	running, ok := logs.Open(logID(0))
	require.True(t, ok)
	for i := 1; i <= RetainFinished+10; i++ {
		log, ok := logs.Open(logID(i))
		require.True(t, ok)
		log.Finish(messages.AttemptOutcome{AttemptID: logID(i)})
		clock.advance(time.Millisecond)
	}
	_, ok = logs.Get(logID(1))
	assert.False(t, ok, "the oldest finished attempts go first")
	_, ok = logs.Get(logID(RetainFinished + 10))
	assert.True(t, ok)
	got, ok := logs.Get(logID(0))
	require.True(t, ok, "a running attempt is never evicted")
	assert.Same(t, running, got)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	assert.Len(t, logs.byID, RetainFinished+1)
}

func TestListSelectsByStateNewestFirstWithinTheRetention(t *testing.T) {
	clock := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := NewLogs(0)
	logs.now = clock.now
	for i := 1; i <= 4; i++ {
		log, ok := logs.Open(logID(i))
		require.True(t, ok)
		log.Append(messages.Event{EventType: "x"})
		clock.advance(time.Second)
		if i != 3 {
			log.Finish(messages.AttemptOutcome{AttemptID: logID(i), Status: messages.StatusSucceeded})
		}
	}
	finished := logs.List(StateFinished, 0)
	require.Len(t, finished, 3)
	assert.Equal(t, []string{logID(4), logID(2), logID(1)}, []string{finished[0].AttemptID, finished[1].AttemptID, finished[2].AttemptID})
	assert.Equal(t, StateFinished, finished[0].State)
	require.NotNil(t, finished[0].Outcome)
	assert.Equal(t, 1, finished[0].Events)

	running := logs.List(StateRunning, 0)
	require.Len(t, running, 1)
	assert.Equal(t, logID(3), running[0].AttemptID)
	assert.Nil(t, running[0].Outcome)

	assert.Len(t, logs.List(StateFinished, 2), 2)
	assert.Len(t, logs.List(StateAll, 0), 4)

	clock.advance(RetainFor + time.Second)
	assert.Empty(t, logs.List(StateFinished, 0), "beyond the retention, nothing is listed")
	assert.Len(t, logs.List(StateAll, 0), 1, "the running attempt stays")
}
