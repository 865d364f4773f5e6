package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

const hostile = "\x1b]0;title\a\x1b[2J\rattempt x succeeded\u202e\u009b"

func TestPrintEventEscapesEveryField(t *testing.T) {
	var out bytes.Buffer
	ev := messages.Event{Role: "agent\x1b[1m", Kind: messages.KindCheckpoint, EventType: "task_output\r", Content: hostile + "\n", OccurredAt: time.Now()}
	printEvent(&out, ev, false)
	printOutcome(&out, messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusFailed, Code: "c\x1b", Message: hostile}, false)
	s := out.String()
	for _, raw := range []string{"\x1b", "\a", "\r", "\u202e", "\u009b"} {
		assert.NotContains(t, s, raw)
	}
	assert.Contains(t, s, `agent\x1b[1m`)
	assert.Contains(t, s, `task_output\r`)
	assert.Contains(t, s, `\x1b]0;title\x07\x1b[2J\rattempt x succeeded\u202e\u009b`)
	assert.Equal(t, 4, strings.Count(s, "\n"), "one line per event, outcome and message: %q", s)
}

func TestPrintEventJSONIsLossless(t *testing.T) {
	var out bytes.Buffer
	ev := messages.Event{Role: "agent", Kind: messages.KindCheckpoint, EventType: "task_output", Content: hostile, OccurredAt: time.Now().UTC()}
	printEvent(&out, ev, true)
	var line struct {
		Event messages.Event `json:"event"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &line))
	assert.Equal(t, hostile, line.Event.Content)
	assert.NotContains(t, out.String(), "\x1b", "JSON carries control characters escaped")
}

func TestPrintTreeEscapesFacts(t *testing.T) {
	var out bytes.Buffer
	printTree(&out, []messages.InspectReply{{PID: "sup", Kind: "supervisor", Phase: "run\x1b[2J", Facts: map[string]string{"msg\r": hostile}}})
	s := out.String()
	assert.NotContains(t, s, "\x1b")
	assert.NotContains(t, s, "\r")
	assert.Contains(t, s, `run\x1b[2J`)
	assert.Contains(t, s, `msg\r=\x1b]0;title`)
}

func TestPrintOutcomeShowsTheIsolation(t *testing.T) {
	var out bytes.Buffer
	printOutcome(&out, messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusSucceeded, Isolation: messages.IsolationGVisor, WorkerRuntime: "runsc-net"}, false)
	assert.Contains(t, out.String(), "isolation:     gvisor (runtime runsc-net)\n")
	out.Reset()
	printOutcome(&out, messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusSucceeded, Isolation: messages.IsolationRunc}, false)
	assert.Contains(t, out.String(), "isolation:     runc\n")
	out.Reset()
	printOutcome(&out, messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusFailed, Code: "c"}, false)
	assert.NotContains(t, out.String(), "isolation", "an attempt refused before the decision names none")
}
