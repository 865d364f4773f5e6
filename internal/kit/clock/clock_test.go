package clock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestManualFiresDueTimersOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManual(start)
	fired := make(chan string, 3)
	c.AfterFunc(time.Minute, func() { fired <- "minute" })
	stopped := c.AfterFunc(30*time.Second, func() { fired <- "stopped" })
	assert.True(t, stopped.Stop())
	assert.False(t, stopped.Stop(), "stopping twice reports it was already stopped")

	c.Advance(59 * time.Second)
	assert.Equal(t, start.Add(59*time.Second), c.Now())
	select {
	case f := <-fired:
		t.Fatalf("%s fired before it was due", f)
	default:
	}
	c.Advance(time.Second)
	select {
	case f := <-fired:
		assert.Equal(t, "minute", f)
	case <-time.After(10 * time.Second):
		t.Fatal("a due timer did not fire")
	}

	c.AfterFunc(0, func() { fired <- "now" })
	select {
	case f := <-fired:
		require.Equal(t, "now", f, "a zero delay fires at once")
	case <-time.After(10 * time.Second):
		t.Fatal("a zero-delay timer did not fire")
	}
}

func TestSystemIsTheWallClock(t *testing.T) {
	var c Clock = System{}
	assert.WithinDuration(t, time.Now(), c.Now(), time.Second)
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
}

func TestAdvanceSyncReturnsAfterTheFiredTimers(t *testing.T) {
	c := NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var fired []string
	var mu sync.Mutex
	for _, name := range []string{"a", "b"} {
		c.AfterFunc(time.Second, func() {
			mu.Lock()
			fired = append(fired, name)
			mu.Unlock()
		})
	}
	c.AfterFunc(time.Hour, func() { t.Error("a timer not yet due fired") })
	assert.Equal(t, 3, c.Pending())
	c.AdvanceSync(time.Second)
	mu.Lock()
	assert.ElementsMatch(t, []string{"a", "b"}, fired, "both fired before AdvanceSync returned")
	mu.Unlock()
	assert.Equal(t, 1, c.Pending())
}
