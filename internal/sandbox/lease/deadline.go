package lease

import (
	"crypto/hmac"
	"math"
	"sync"
	"time"

	"github.com/forgedev/forged/failure"
)

// Clock reads the time for a Deadline.
type Clock interface {
	// Now returns the wall-clock time and a monotonic reading taken at the
	// same instant. Monotonic readings are comparable only with readings of
	// the same Clock and never jump when the wall clock is set.
	Now() (wall time.Time, mono time.Duration)
}

// SystemClock returns the process's clock: time.Now for the wall clock,
// and its monotonic reading (relative to an arbitrary origin) for the
// monotonic one.
func SystemClock() Clock { return systemClock{} }

// clockOrigin is the origin of the system clock's monotonic readings.
var clockOrigin = time.Now()

type systemClock struct{}

func (systemClock) Now() (time.Time, time.Duration) {
	now := time.Now()
	return now, now.Sub(clockOrigin) // both carry monotonic readings
}

// Deadline is the lease deadline of one attempt. It is safe for
// concurrent use.
type Deadline struct {
	attemptID    string
	fencingToken string
	controlKey   string
	clock        Clock

	mu        sync.Mutex
	expiresAt time.Time     // the wall-clock expiry last accepted
	deadline  time.Duration // the monotonic reading at which the lease ends
}

// NewDeadline returns the deadline of the lease of attemptID under
// fencingToken that expires at expiresAt (already past means expired).
// The expiry is converted to a monotonic deadline now. Updates must be
// signed with controlKey; with an empty key no update is ever accepted. A
// nil clock means SystemClock.
func NewDeadline(attemptID, fencingToken string, expiresAt time.Time, controlKey string, clock Clock) *Deadline {
	if clock == nil {
		clock = SystemClock()
	}
	d := &Deadline{attemptID: attemptID, fencingToken: fencingToken, controlKey: controlKey, clock: clock}
	d.set(expiresAt)
	return d
}

// set moves the deadline to expiresAt, converted with one clock reading.
// The caller holds d.mu or owns d exclusively.
func (d *Deadline) set(expiresAt time.Time) {
	wall, mono := d.clock.Now()
	d.expiresAt = expiresAt
	d.deadline = addSaturating(mono, max(expiresAt.Sub(wall), 0))
}

// Apply moves the deadline to the update's expiry when the update is well
// formed (UpdateInvalid otherwise), names this deadline's attempt and
// fencing token and carries a valid MAC under its control key
// (UpdateForbidden otherwise), and expires strictly later than the current
// expiry (UpdateStale otherwise). A refused update changes nothing. The new
// expiry is converted to a monotonic deadline with the clock's current
// reading.
func (d *Deadline) Apply(u Update) error {
	expiry, mac, err := u.parse()
	if err != nil {
		return err
	}
	if u.DispatchAttemptID != d.attemptID {
		return failure.New(UpdateForbidden, "lease update: the update is for another attempt")
	}
	if u.FencingToken != d.fencingToken {
		return failure.New(UpdateForbidden, "lease update: the update carries another fencing token")
	}
	if d.controlKey == "" {
		return failure.New(UpdateForbidden, "lease update: the lease has no control key")
	}
	want := computeMAC(u.DispatchAttemptID, u.FencingToken, u.ExpiresAt, d.controlKey)
	if !hmac.Equal(want, mac) {
		return failure.New(UpdateForbidden, "lease update: the MAC does not verify")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !expiry.After(d.expiresAt) {
		return failure.New(UpdateStale, "lease update: expiry %s is not later than the current %s",
			expiry.UTC().Format(time.RFC3339Nano), d.expiresAt.UTC().Format(time.RFC3339Nano))
	}
	d.set(expiry)
	return nil
}

// Remaining is the time left until the deadline, zero once it passed.
func (d *Deadline) Remaining() time.Duration {
	_, mono := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(d.deadline-mono, 0)
}

// Expired reports whether the deadline has passed.
func (d *Deadline) Expired() bool {
	_, mono := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	return mono >= d.deadline
}

// ExpiresAt is the wall-clock expiry last accepted (the initial one or
// that of the last applied update).
func (d *Deadline) ExpiresAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expiresAt
}

// addSaturating returns a+b for b >= 0, capped at the largest Duration.
func addSaturating(a, b time.Duration) time.Duration {
	if a > 0 && b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
