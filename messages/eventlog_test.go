package messages

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// eventLog signs n runner events under key as the worker logs them.
func eventLog(t testing.TB, key []byte, n int) [][]byte {
	lines := make([][]byte, n)
	for i := range lines {
		line, err := SignEventLine(key, uint64(i), RunnerEvent("step", strings.Repeat("x", i), nil))
		require.NoError(t, err)
		lines[i] = line
	}
	return lines
}

func TestParseEventLogReturnsTheEventsInOrder(t *testing.T) {
	key := EventKey("log-key")
	lines := eventLog(t, key, 4)
	events, err := ParseEventLog(key, bytes.Join(lines, nil))
	require.NoError(t, err)
	require.Len(t, events, 4)
	for i, ev := range events {
		assert.Equal(t, uint64(i), ev.Seq)
		assert.Equal(t, RoleRunner, ev.Event.Role)
		assert.Equal(t, strings.Repeat("x", i), ev.Event.Content)
	}
	// The line the worker was writing when the log was read is left out.
	partial := append(bytes.Join(lines[:3], nil), lines[3][:len(lines[3])/2]...)
	events, err = ParseEventLog(key, partial)
	require.NoError(t, err)
	assert.Len(t, events, 3)
	events, err = ParseEventLog(key, nil)
	require.NoError(t, err)
	assert.Empty(t, events)
}

func TestParseEventLogRefusesWhatDoesNotCheckOut(t *testing.T) {
	key := EventKey("log-key")
	lines := eventLog(t, key, 3)
	other := eventLog(t, EventKey("another attempt"), 3)
	tampered := bytes.Replace(lines[1], []byte(`"content":"x"`), []byte(`"content":"y"`), 1)
	require.NotEqual(t, lines[1], tampered)
	unsigned := []byte(`{"type":"runner_event","event":{"role":"runner","kind":"k","content":"c","eventType":"t"}}` + "\n")
	cases := map[string][]byte{
		"a gap":                {},
		"a duplicate":          bytes.Join([][]byte{lines[0], lines[1], lines[1]}, nil),
		"reordered":            bytes.Join([][]byte{lines[1], lines[0]}, nil),
		"not from zero":        bytes.Join(lines[1:], nil),
		"another key":          bytes.Join(other, nil),
		"an altered event":     bytes.Join([][]byte{lines[0], tampered, lines[2]}, nil),
		"an unsigned line":     append(append([]byte{}, lines[0]...), unsigned...),
		"a line of the task's": append(append([]byte{}, lines[0]...), []byte("hello from the task\n")...),
		"too large":            bytes.Repeat([]byte("a"), MaxEventLogBytes+1),
	}
	cases["a gap"] = bytes.Join([][]byte{lines[0], lines[2]}, nil)
	for name, log := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseEventLog(key, log)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxEventLogInvalid, failure.CodeOf(err))
		})
	}
	_, err := ParseEventLog(nil, bytes.Join(lines, nil))
	assert.Equal(t, failure.SandboxEventLogInvalid, failure.CodeOf(err), "no key, no log")
}

func TestResumedVerifierDropsWhatTheLogDelivered(t *testing.T) {
	key := EventKey("log-key")
	lines := eventLog(t, key, 4)
	v := NewResumedEventVerifier(key, 2)
	for _, delivered := range lines[:2] {
		ev, err := v.Parse(delivered)
		require.NoError(t, err)
		assert.Nil(t, ev, "a line the log delivered is dropped, not demoted")
	}
	ev, err := v.Parse(lines[2])
	require.NoError(t, err)
	require.NotNil(t, ev)
	assert.Equal(t, RoleRunner, ev.Role)
	// A replay of a genuine line is dropped too (it was delivered), and a
	// forged line never verifies: it is the agent's.
	ev, err = v.Parse(lines[2])
	require.NoError(t, err)
	assert.Nil(t, ev)
	forged := eventLog(t, EventKey("guess"), 1)[0]
	ev, err = v.Parse(forged)
	require.NoError(t, err)
	assert.Equal(t, RoleAgent, ev.Role)
	// A fresh verifier never drops: it demotes.
	ev, err = NewEventVerifier(key).Parse(lines[0])
	require.NoError(t, err)
	assert.Equal(t, RoleRunner, ev.Role)
}

func FuzzParseEventLog(f *testing.F) {
	key := EventKey("fuzz-log")
	lines := eventLog(f, key, 3)
	f.Add(bytes.Join(lines, nil))
	f.Add(bytes.Join([][]byte{lines[0], lines[2]}, nil))
	f.Add(append(bytes.Join(lines[:2], nil), lines[2][:10]...))
	f.Add([]byte("{\"type\":\"runner_event\",\"seq\":0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ParseEventLog(key, data)
		if err != nil {
			if failure.CodeOf(err) != failure.SandboxEventLogInvalid {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		// Whatever is accepted is in sequence from 0, and each event's
		// line verified: re-signing it reproduces a line of the log.
		for i, ev := range events {
			if ev.Seq != uint64(i) {
				t.Fatalf("event %d has seq %d", i, ev.Seq)
			}
		}
		if len(events) > bytes.Count(data, []byte{'\n'}) {
			t.Fatalf("%d events from %d lines", len(events), bytes.Count(data, []byte{'\n'}))
		}
	})
}
