package actortest

import (
	"time"

	"github.com/forgedev/forged/internal/kit/clock"
)

// Clock is the time source forged's timer-using actors take
// (supervisor.Config.Clock, actors.AttemptConfig.Clock, …): Now, and
// AfterFunc(d, f) Timer, which calls f on its own goroutine once d has
// passed, unless the Timer is stopped. A *ManualClock is one; so is the
// wall clock forged uses in production. Declare your own timer-using
// actors' clock as a Clock so that a test can give them a System's.
type Clock = clock.Clock

// Timer is a stoppable timer set by Clock.AfterFunc: Stop() bool reports
// whether it stopped a timer that had not fired.
type Timer = clock.Timer

// ManualClock is a Clock that only moves when the test moves it, the clock
// every System runs on (System.Clock). Its methods:
//
//   - Now() time.Time: the clock's current time;
//   - AfterFunc(d, f) Timer: f runs once the clock reaches Now()+d;
//   - Advance(d): moves the clock forward and fires the timers due, each
//     on its own goroutine, without waiting for them;
//   - AdvanceSync(d): Advance, returning once every timer it fired has
//     returned (System.Advance uses it: a timer's tick is then sent).
//
// NewManualClock makes one; WithClock gives it to a System.
type ManualClock = clock.Manual

// NewManualClock returns a manual clock stopped at now.
func NewManualClock(now time.Time) *ManualClock { return clock.NewManual(now) }
