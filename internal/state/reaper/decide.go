package reaper

import (
	"time"

	"github.com/forgedev/forged/internal/state/ledger"
)

// ServerAttempt is the server's view of one attempt of this runner, from
// its snapshot of the attempts it still considers live. Its JSON is the
// seed's attemptSnapshot entry (POST /v1/reap).
type ServerAttempt struct {
	AttemptID        string    `json:"dispatchAttemptId"`
	FencingToken     string    `json:"fencingToken"`
	RunnerInstanceID string    `json:"runnerInstanceId"`
	ExpiresAt        time.Time `json:"expiresAt"`
}

// ShouldReapLedger decides whether the attempt recorded in e may be
// reaped by the runner instance currentInstance at now. server is the
// server's record of the attempt (nil when its snapshot does not list it)
// and snapshotAvailable says whether a snapshot was obtained at all.
//
// A ledger of another runner instance is always reaped: that instance
// shared this state root and is gone. Otherwise, without a snapshot only
// an expired lease is reaped; with one, the attempt is kept only while the
// server holds it with the same attempt, fence and instance and an
// unexpired lease. Whether this process is running the attempt is the
// caller's check (Config.Live), made first.
func ShouldReapLedger(e ledger.Entry, currentInstance string, server *ServerAttempt, snapshotAvailable bool, now time.Time) bool {
	if e.RunnerInstanceID != currentInstance {
		return true
	}
	if !snapshotAvailable {
		return !e.ExpiresAt.After(now)
	}
	return server == nil ||
		server.AttemptID != e.AttemptID ||
		server.FencingToken != e.FencingToken ||
		server.RunnerInstanceID != e.RunnerInstanceID ||
		!server.ExpiresAt.After(now)
}
