package messages

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestParseRunnerEventLine(t *testing.T) {
	// Without a key nothing verifies: every runner event is the agent's,
	// with the host's event type and time.
	ev, err := ParseRunnerEventLine([]byte(`{"type":"runner_event","event":{"role":"agent","kind":"checkpoint","content":"hi","eventType":"task_output","occurredAt":"2001-01-01T00:00:00Z"}}`))
	require.NoError(t, err)
	require.NotNil(t, ev)
	assert.Equal(t, "hi", ev.Content)
	assert.WithinDuration(t, time.Now(), ev.OccurredAt, time.Minute, "the host's time, not the claimed one")

	ev, err = ParseRunnerEventLine([]byte(`{"type":"runner_event","event":{"role":"runner","kind":"error","content":"hi","eventType":"sandbox_output_imported"}}`))
	require.NoError(t, err)
	assert.Equal(t, RoleAgent, ev.Role, "without a key no event is the runner's")
	assert.Equal(t, TaskOutputEventType, ev.EventType, "the host's event type, not the claimed one")
	assert.Equal(t, KindCheckpoint, ev.Kind)
	require.NotNil(t, ev.Data)
	assert.JSONEq(t, `{"stream":"unverified","claimedEventType":"sandbox_output_imported"}`, *ev.Data)

	for _, noise := range []string{"", "plain text", `{"type":"other"}`, `{not json`, `[1,2]`} {
		ev, err := ParseRunnerEventLine([]byte(noise))
		assert.NoError(t, err, noise)
		assert.Nil(t, ev, noise)
	}
	malformed := []string{
		`{"type":"runner_event"}`,
		`{"type":"runner_event","event":{"role":"a","kind":"b","content":"c"}}`,
		`{"type":"runner_event","event":{"role":1,"kind":"b","content":"c","eventType":"d"}}`,
		`{"type":"runner_event","event":{"role":"` + strings.Repeat("r", 65) + `","kind":"b","content":"c","eventType":"d"}}`,
		`{"type":"runner_event","event":{"role":"a","kind":"b","content":"c","eventType":"d","occurredAt":"yesterday"}}`,
	}
	for _, line := range malformed {
		ev, err := ParseRunnerEventLine([]byte(line))
		require.NoError(t, err, "a malformed line from the task is its text, not an error: %s", line)
		assert.Equal(t, RoleAgent, ev.Role)
		assert.Equal(t, TaskOutputEventType, ev.EventType)
		assert.Equal(t, line, ev.Content)
		assert.JSONEq(t, `{"stream":"unverified","malformed":true}`, *ev.Data)
	}
}

// TestAMalformedEventOfTheWorkerIsInvalid: a line whose MAC verifies is the
// worker's, and the worker breaking the format is an error.
func TestAMalformedEventOfTheWorkerIsInvalid(t *testing.T) {
	key := EventKey("control-key")
	event := []byte(`{"role":"runner","content":"c"}`)
	line, err := json.Marshal(signedLine{Type: RunnerEventType, Seq: 0, Event: event,
		MAC: base64.RawURLEncoding.EncodeToString(eventMAC(key, 0, event))})
	require.NoError(t, err)
	_, err = NewEventVerifier(key).Parse(line)
	assert.Equal(t, failure.SandboxEventInvalid, failure.CodeOf(err))
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
