package reaper

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/state/ledger"
)

func TestShouldReapLedger(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	instance := uuid()
	e := ledger.Entry{
		AttemptID:        uuid(),
		FencingToken:     uuid(),
		RunnerInstanceID: instance,
		ExpiresAt:        now.Add(time.Hour),
	}
	current := func() *ServerAttempt {
		return &ServerAttempt{AttemptID: e.AttemptID, FencingToken: e.FencingToken, RunnerInstanceID: instance, ExpiresAt: now.Add(time.Hour)}
	}
	with := func(mutate func(a *ServerAttempt)) *ServerAttempt {
		a := current()
		mutate(a)
		return a
	}
	expired := e
	expired.ExpiresAt = now
	other := e
	other.RunnerInstanceID = uuid()

	cases := []struct {
		name      string
		entry     ledger.Entry
		server    *ServerAttempt
		snapshot  bool
		wantReaps bool
	}{
		{"other runner instance", other, nil, false, true},
		{"other runner instance, server holds it", other, with(func(a *ServerAttempt) { a.RunnerInstanceID = other.RunnerInstanceID }), true, true},
		{"no snapshot, lease current", e, nil, false, false},
		{"no snapshot, lease expired", expired, nil, false, true},
		{"snapshot holds it", e, current(), true, false},
		{"snapshot holds it though the ledger's lease expired", expired, current(), true, false},
		{"snapshot lacks the attempt", e, nil, true, true},
		{"snapshot record of another attempt", e, with(func(a *ServerAttempt) { a.AttemptID = uuid() }), true, true},
		{"fence mismatch", e, with(func(a *ServerAttempt) { a.FencingToken = uuid() }), true, true},
		{"instance mismatch on the server", e, with(func(a *ServerAttempt) { a.RunnerInstanceID = uuid() }), true, true},
		{"server lease expired", e, with(func(a *ServerAttempt) { a.ExpiresAt = now }), true, true},
		{"server record ignored without snapshot", e, with(func(a *ServerAttempt) { a.FencingToken = uuid() }), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.wantReaps, ShouldReapLedger(c.entry, instance, c.server, c.snapshot, now))
		})
	}
}

// A round prints camelCase, like every other document forged prints
// (forged reap, POST /v1/reap).
func TestRoundJSONIsCamelCase(t *testing.T) {
	raw, err := json.Marshal(Round{Reaped: []string{"a"}, Skipped: []Skip{{AttemptID: "a", Reason: SkipLive}}, Corrupt: []ledger.Corrupt{{Path: "p", Reason: "r"}}})
	require.NoError(t, err)
	for _, key := range []string{`"started"`, `"reaped"`, `"wouldReap"`, `"skipped"`, `"attemptId"`, `"corrupt"`, `"path"`, `"kind"`} {
		assert.Contains(t, string(raw), key)
	}
	assert.NotRegexp(t, `"[A-Z]`, string(raw), "no Go field names")
}
