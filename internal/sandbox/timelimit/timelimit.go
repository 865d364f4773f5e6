// Package timelimit holds the time limits of one sandbox attempt: the hard
// wall (the longest a worker may run) and the idle limit (the longest it
// may go without output). The operator sets both; a dispatch's task
// timeout can only shorten them. The worker enforces them from inside the
// sandbox and the attempt actor from the host, so a silent or hung task
// never holds a slot for longer, even when the worker does not cooperate.
package timelimit

import (
	"fmt"
	"time"
)

// Bounds and defaults of the operator's settings, as in the seed
// (FORGE_SANDBOX_HARD_WALL_SECONDS, FORGE_SANDBOX_IDLE_SECONDS).
const (
	MinHardWall     = time.Minute
	MaxHardWall     = 8 * time.Hour
	DefaultHardWall = MaxHardWall
	MinIdle         = time.Minute
	DefaultIdle     = 10 * time.Minute
)

// Limits are an attempt's time limits.
type Limits struct {
	HardWall time.Duration
	Idle     time.Duration
}

// Default returns the seed's defaults: 8 h and 10 min.
func Default() Limits { return Limits{HardWall: DefaultHardWall, Idle: DefaultIdle} }

// Operator validates the operator's settings: a hard wall of 60 s to 8 h
// and an idle limit of 60 s up to the hard wall, in whole seconds.
func Operator(hardWall, idle time.Duration) (Limits, error) {
	switch {
	case hardWall < MinHardWall || hardWall > MaxHardWall:
		return Limits{}, fmt.Errorf("the hard wall %s is outside [%s, %s]", hardWall, MinHardWall, MaxHardWall)
	case idle < MinIdle || idle > hardWall:
		return Limits{}, fmt.Errorf("the idle limit %s is outside [%s, the hard wall %s]", idle, MinIdle, hardWall)
	case hardWall%time.Second != 0 || idle%time.Second != 0:
		return Limits{}, fmt.Errorf("the hard wall %s and the idle limit %s must be whole seconds", hardWall, idle)
	}
	return Limits{HardWall: hardWall, Idle: idle}, nil
}

// ForTask returns the limits of one attempt: a positive task timeout
// shortens the hard wall (never lengthens it), and the idle limit never
// exceeds the hard wall. Zero limits take the defaults.
func (l Limits) ForTask(taskTimeoutSeconds int) Limits {
	if l.HardWall <= 0 {
		l.HardWall = DefaultHardWall
	}
	if l.Idle <= 0 {
		l.Idle = DefaultIdle
	}
	if t := time.Duration(taskTimeoutSeconds) * time.Second; t > 0 && t < l.HardWall {
		l.HardWall = t
	}
	l.Idle = min(l.Idle, l.HardWall)
	return l
}
