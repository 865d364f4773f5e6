package reaper

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestParseSnapshot(t *testing.T) {
	s, err := ParseSnapshot(nil)
	require.NoError(t, err)
	assert.Nil(t, s, "no body, no snapshot")

	s, err = ParseSnapshot([]byte(`{"attemptSnapshot":[]}`))
	require.NoError(t, err)
	require.NotNil(t, s)
	var cfg Config
	s.Apply(&cfg)
	assert.True(t, cfg.SnapshotAvailable, "an empty list is a snapshot: the server holds nothing")

	s, err = ParseSnapshot([]byte(`{"attemptSnapshot":[{"dispatchAttemptId":"00000000-0000-4000-8000-0000000000a1","fencingToken":"00000000-0000-4000-8000-0000000000a3","runnerInstanceId":"00000000-0000-4000-8000-000000000002","expiresAt":"2030-01-01T00:00:00Z"}]}`))
	require.NoError(t, err)
	assert.Equal(t, []ServerAttempt{{AttemptID: "00000000-0000-4000-8000-0000000000a1", FencingToken: "00000000-0000-4000-8000-0000000000a3",
		RunnerInstanceID: "00000000-0000-4000-8000-000000000002", ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}}, s.Attempts)

	var none *Snapshot
	cfg = Config{}
	none.Apply(&cfg)
	assert.False(t, cfg.SnapshotAvailable)

	for name, body := range map[string]string{
		"not json":        `attempts`,
		"no list":         `{}`,
		"null list":       `{"attemptSnapshot":null}`,
		"unknown field":   `{"attemptSnapshot":[],"all":true}`,
		"duplicate field": `{"attemptSnapshot":[],"attemptSnapshot":[]}`,
		"trailing":        `{"attemptSnapshot":[]} {}`,
		"short id":        `{"attemptSnapshot":[{"dispatchAttemptId":"a1","fencingToken":"00000000-0000-4000-8000-0000000000a3","runnerInstanceId":"00000000-0000-4000-8000-000000000002","expiresAt":"2030-01-01T00:00:00Z"}]}`,
		"no expiry":       `{"attemptSnapshot":[{"dispatchAttemptId":"00000000-0000-4000-8000-0000000000a1","fencingToken":"00000000-0000-4000-8000-0000000000a3","runnerInstanceId":"00000000-0000-4000-8000-000000000002"}]}`,
		"uppercase fence": `{"attemptSnapshot":[{"dispatchAttemptId":"00000000-0000-4000-8000-0000000000a1","fencingToken":"00000000-0000-4000-8000-0000000000A3","runnerInstanceId":"00000000-0000-4000-8000-000000000002","expiresAt":"2030-01-01T00:00:00Z"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSnapshot([]byte(body))
			assert.Equal(t, failure.ReapRequestInvalid, failure.CodeOf(err), "%v", err)
		})
	}
}
