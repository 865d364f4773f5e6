// Package clock is the one time source of forged's timer-using actors
// (supervisor, capacity refresh, reaper, lease watchdog, memory sampler):
// System in production, Manual in tests, so that deadlines and periods are
// deterministic and no test sleeps on the wall clock.
package clock

import (
	"sync"
	"time"
)

// Clock is a time source with timers. Tests inject a Manual clock to make
// deadlines deterministic.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable timer.
type Timer interface {
	Stop() bool
}

// System is the wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a Clock that only moves when Advance is called.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManual returns a clock stopped at now.
func NewManual(now time.Time) *Manual { return &Manual{now: now} }

type manualTimer struct {
	clock   *Manual
	at      time.Time
	f       func()
	stopped bool
}

// Now returns the clock's current time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc registers f to run when the clock reaches now+d.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	t := &manualTimer{clock: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	if d <= 0 {
		c.Advance(0)
	}
	return t
}

// Advance moves the clock forward and fires the timers that are due, each
// on its own goroutine as time.AfterFunc would.
func (c *Manual) Advance(d time.Duration) {
	for _, f := range c.due(d) {
		go f()
	}
}

// AdvanceSync is Advance, but returns only once every timer it fired has
// returned: a timer of an actor sends its tick message before AdvanceSync
// returns, so a test can then expect what the tick causes.
func (c *Manual) AdvanceSync(d time.Duration) {
	var wg sync.WaitGroup
	for _, f := range c.due(d) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
}

// due moves the clock forward by d and removes and returns the timers that
// are then due, in the order they were set.
func (c *Manual) due(d time.Duration) []func() {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			due = append(due, t.f)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	return due
}

func (t *manualTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Pending returns how many timers are armed (neither fired nor stopped):
// a test waits for an actor to re-arm before it advances the clock.
func (c *Manual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}
