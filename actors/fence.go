package actors

import (
	"github.com/forgedev/forged/internal/kit/clock"
	"sync"
	"time"

	"github.com/forgedev/forged/failure"
)

// fence is the attempt's current lease and fencing token. It is read from
// goroutines (the import's currency check, the watchdog) and written by the
// attempt actor, so it is guarded by a mutex.
type fence struct {
	mu           sync.Mutex
	clk          clock.Clock
	fencingToken string
	expiresAt    time.Time
	cancelled    bool
}

func newFence(clk clock.Clock, token string, expiresAt time.Time) *fence {
	return &fence{clk: clk, fencingToken: token, expiresAt: expiresAt}
}

func (f *fence) expiry() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.expiresAt
}

// renew extends the lease for token to expiresAt. It refuses another
// token, a lease that already expired, and an expiry that is not strictly
// later.
func (f *fence) renew(token string, expiresAt time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case token != f.fencingToken:
		return failure.New(failure.SandboxOutputStale, "the fencing token is not the attempt's")
	case f.cancelled:
		return failure.New(failure.SandboxCancelled, "the attempt is being cancelled")
	case !f.clk.Now().Before(f.expiresAt):
		return failure.New(failure.SandboxLeaseExpired, "the lease already expired at %s", f.expiresAt.Format(time.RFC3339))
	case !expiresAt.After(f.expiresAt):
		return failure.New(failure.SandboxOutputStale, "the new expiry %s is not later than %s", expiresAt.Format(time.RFC3339), f.expiresAt.Format(time.RFC3339))
	}
	f.expiresAt = expiresAt
	return nil
}

func (f *fence) cancel() {
	f.mu.Lock()
	f.cancelled = true
	f.mu.Unlock()
}

// assertCurrent is called immediately before an irreversible step (moving a
// branch). It fails with sandbox_output_stale when the attempt was
// cancelled, its lease expired or its fencing token changed.
func (f *fence) assertCurrent(token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.cancelled:
		return failure.New(failure.SandboxOutputStale, "the attempt was cancelled before its result could be imported")
	case token != f.fencingToken:
		return failure.New(failure.SandboxOutputStale, "the attempt's fencing token is no longer current")
	case !f.clk.Now().Before(f.expiresAt):
		return failure.New(failure.SandboxOutputStale, "the attempt's lease expired at %s", f.expiresAt.Format(time.RFC3339))
	}
	return nil
}
