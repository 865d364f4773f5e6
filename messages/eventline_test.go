package messages

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestParseRunnerEventLine(t *testing.T) {
	ev, err := ParseRunnerEventLine([]byte(`{"type":"runner_event","event":{"role":"agent","kind":"checkpoint","content":"hi","eventType":"task_output","occurredAt":"2026-01-01T00:00:00Z"}}`))
	require.NoError(t, err)
	require.NotNil(t, ev)
	assert.Equal(t, "hi", ev.Content)
	assert.Equal(t, 2026, ev.OccurredAt.Year())

	for _, noise := range []string{"", "plain text", `{"type":"other"}`, `{not json`, `[1,2]`} {
		ev, err := ParseRunnerEventLine([]byte(noise))
		assert.NoError(t, err, noise)
		assert.Nil(t, ev, noise)
	}
	invalid := []string{
		`{"type":"runner_event"}`,
		`{"type":"runner_event","event":{"role":"a","kind":"b","content":"c"}}`,
		`{"type":"runner_event","event":{"role":1,"kind":"b","content":"c","eventType":"d"}}`,
		`{"type":"runner_event","event":{"role":"` + strings.Repeat("r", 65) + `","kind":"b","content":"c","eventType":"d"}}`,
		`{"type":"runner_event","event":{"role":"a","kind":"b","content":"c","eventType":"d","occurredAt":"yesterday"}}`,
	}
	for _, line := range invalid {
		_, err := ParseRunnerEventLine([]byte(line))
		assert.Equal(t, failure.SandboxEventInvalid, failure.CodeOf(err), line)
	}
}

func FuzzParseRunnerEventLine(f *testing.F) {
	f.Add([]byte(`{"type":"runner_event","event":{"role":"agent","kind":"checkpoint","content":"hi","eventType":"x"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseRunnerEventLine(line)
		if err != nil && failure.CodeOf(err) != failure.SandboxEventInvalid {
			t.Fatalf("unexpected error class: %v", err)
		}
		if err == nil && ev != nil && len(ev.Role) > maxEventRole {
			t.Fatal("bounds not enforced")
		}
	})
}
