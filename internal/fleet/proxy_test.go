package fleet

import (
	"testing"
	"time"
)

// TestClaimedSilenceBoundsTheWait: a member that claimed its attempt and
// left is waited for claimedWait (10 s) from the moment it is seen gone,
// on a fixed clock; the request made meanwhile never waits past the
// bound; an answer from its address (a member restarted there) starts
// the measure again.
func TestClaimedSilenceBoundsTheWait(t *testing.T) {
	if claimedWait != 10*time.Second {
		t.Fatalf("claimedWait = %s; the documented loss bound is 10 s (docs/fleet.md)", claimedWait)
	}
	full := eventsHold + DefaultRequestTimeout
	t0 := time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC)
	var c claimedSilence
	if got := c.wait(t0, full); got != full {
		t.Fatalf("a heard member's request waits %s; want %s", got, full)
	}
	if c.gone(t0) {
		t.Fatal("lost at the first sight of its absence")
	}
	if got := c.wait(t0.Add(6*time.Second), full); got != 4*time.Second {
		t.Fatalf("6 s into the silence a request may wait %s; want the 4 s left", got)
	}
	if c.gone(t0.Add(claimedWait - time.Millisecond)) {
		t.Fatal("lost before the bound")
	}
	if got := c.wait(t0.Add(claimedWait+time.Second), full); got != time.Millisecond {
		t.Fatalf("past the bound a request may wait %s; want the floor of 1 ms", got)
	}
	// An answer from the address resets it: the bound runs again from the
	// next sight of the absence.
	c.heard()
	t1 := t0.Add(claimedWait - time.Second)
	if c.gone(t1) || c.gone(t1.Add(claimedWait-time.Millisecond)) {
		t.Fatal("an answer did not start the measure again")
	}
	if !c.gone(t1.Add(claimedWait)) {
		t.Fatal("not lost claimedWait after the silence began again")
	}
}
