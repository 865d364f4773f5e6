package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReachCutsOffAfterTheTTL: a member is cut off once no probe of etcd
// succeeded for longer than cutOffAfter, not at the first failed probe,
// and reaches etcd again at the first one that succeeds; each change is
// reported once.
func TestReachCutsOffAfterTheTTL(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := reach{lastOK: start}
	type step struct {
		ok           bool
		at           time.Duration
		cut, changed bool
	}
	for i, s := range []step{
		{true, time.Second, false, false},
		{false, 2 * time.Second, false, false},
		{false, time.Second + cutOffAfter, false, false}, // exactly the TTL since the last success
		{false, time.Second + cutOffAfter + time.Millisecond, true, true},
		{false, 10 * time.Second, true, false},
		{true, 11 * time.Second, false, true},
		{false, 12 * time.Second, false, false},
	} {
		cut, changed := r.observe(s.ok, start.Add(s.at))
		assert.Equal(t, s.cut, cut, "step %d: cut", i)
		assert.Equal(t, s.changed, changed, "step %d: changed", i)
	}
}
