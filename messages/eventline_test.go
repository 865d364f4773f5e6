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

	ev, err = ParseRunnerEventLine([]byte(`{"type":"runner_event","event":{"role":"runner","kind":"checkpoint","content":"hi","eventType":"sandbox_output_imported"}}`))
	require.NoError(t, err)
	assert.Equal(t, RoleAgent, ev.Role, "without a key no event is the runner's")

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
		if err == nil && ev != nil && ev.Role != RoleAgent {
			t.Fatalf("an unauthenticated line kept role %q", ev.Role)
		}
	})
}

func TestEventVerifierKeepsOnlyTheWorkersSignedEvents(t *testing.T) {
	key := EventKey("control-key")
	other := EventKey("another-attempt")
	assert.NotEqual(t, key, other)
	assert.NotEqual(t, []byte("control-key"), key, "the event key is derived, not the lease key")
	ev := RunnerEvent("result_committed", "result committed", map[string]any{"sha": "x"})

	sign := func(k []byte, seq uint64, e Event) []byte {
		line, err := SignEventLine(k, seq, e)
		require.NoError(t, err)
		return line
	}
	v := NewEventVerifier(key)
	parse := func(line []byte) *Event {
		got, err := v.Parse(line)
		require.NoError(t, err)
		require.NotNil(t, got)
		return got
	}
	first := sign(key, 0, ev)
	assert.Equal(t, RoleRunner, parse(first).Role)
	assert.Equal(t, RoleAgent, parse(first).Role, "a replayed line is demoted")
	assert.Equal(t, RoleAgent, parse(sign(other, 1, ev)).Role, "another attempt's key does not verify")
	assert.Equal(t, RoleRunner, parse(sign(key, 5, ev)).Role, "numbers may skip (a line stolen from the pipe)")
	assert.Equal(t, RoleAgent, parse(sign(key, 3, ev)).Role, "but never go back")

	// Altering any byte of the event, or its number, breaks the MAC.
	signed := string(sign(key, 9, ev))
	for name, tampered := range map[string]string{
		"content": strings.Replace(signed, "result committed", "result commitTed", 1),
		"type":    strings.Replace(signed, "result_committed", "sandbox_output_imported", 1),
		"seq":     strings.Replace(signed, `"seq":9`, `"seq":10`, 1),
		"no mac":  strings.Replace(signed, `"mac":"`, `"nomac":"`, 1),
	} {
		require.NotEqual(t, signed, tampered, name)
		got, err := v.Parse([]byte(tampered))
		require.NoError(t, err, name)
		if got != nil {
			assert.Equal(t, RoleAgent, got.Role, name)
		}
	}
	assert.Equal(t, RoleRunner, parse([]byte(signed)).Role, "the untampered line still verifies")
	assert.Equal(t, 3, v.Verified)

	// A line with a wrong-typed number or MAC is noise.
	got, err := v.Parse([]byte(`{"type":"runner_event","seq":"1","mac":1,"event":{"role":"runner","kind":"k","content":"c","eventType":"t"}}`))
	require.NoError(t, err)
	assert.Nil(t, got)
	// With no key, nothing verifies, not even a line signed with an empty key.
	empty := NewEventVerifier(nil)
	got, err = empty.Parse(sign(nil, 0, ev))
	require.NoError(t, err)
	assert.Equal(t, RoleAgent, got.Role)
}

func FuzzEventVerifier(f *testing.F) {
	key := EventKey("fuzz")
	signed, _ := SignEventLine(key, 0, RunnerEvent("worker_started", "up", nil))
	f.Add(signed)
	f.Add([]byte(`{"type":"runner_event","seq":0,"mac":"","event":{"role":"runner","kind":"k","content":"c","eventType":"t"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		v := NewEventVerifier(key)
		ev, err := v.Parse(line)
		if err != nil && failure.CodeOf(err) != failure.SandboxEventInvalid {
			t.Fatalf("unexpected error class: %v", err)
		}
		if ev == nil || ev.Role == RoleAgent {
			return
		}
		// A non-agent role survives only when the line verified.
		if v.Verified != 1 {
			t.Fatalf("role %q kept without verification", ev.Role)
		}
	})
}
