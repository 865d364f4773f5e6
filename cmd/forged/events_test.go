package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// logsOnly is a daemon that serves only its event logs (the events route
// asks for nothing else).
type logsOnly struct {
	httpapi.Runner
	logs *runner.Logs
}

func (l logsOnly) Logs() *runner.Logs        { return l.logs }
func (l logsOnly) Metrics() *metrics.Metrics { return metrics.New() }

// serveLogs serves the real API over logs on a unix socket.
func serveLogs(t *testing.T, logs *runner.Logs) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "forged.sock")
	l, err := httpapi.Listen(socket, httpapi.ListenOptions{})
	require.NoError(t, err)
	srv := &http.Server{Handler: httpapi.HandlerWith(logsOnly{logs: logs}, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Options{})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	return socket
}

// TestEventsCommandPrintsTheEventsAfterTheCursor: `forged events --after N`
// prints the events after N, each with its sequence number (escaped), then
// the outcome, and exits with the outcome's status; --json prints the
// daemon's stream lines.
func TestEventsCommandPrintsTheEventsAfterTheCursor(t *testing.T) {
	logs, err := runner.OpenLogs(t.TempDir(), 0)
	require.NoError(t, err)
	log, ok := logs.Open("a1")
	require.True(t, ok)
	log.Append(messages.Event{Role: "runner", EventType: "first"})
	log.Append(messages.Event{Role: "agent", EventType: "second", Content: "hi\x1b[2J"})
	log.Append(messages.Event{Role: "runner", EventType: "third"})
	log.Finish(messages.AttemptOutcome{AttemptID: "a1", Status: messages.StatusFailed, Code: "sandbox_worker_failed"})
	socket := serveLogs(t, logs)

	run := func(args ...string) (string, error) {
		root := newRootCommand(func(string) (string, bool) { return "", false })
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"events", "--socket", socket}, args...))
		err := root.Execute()
		return out.String(), err
	}
	text, err := run("--after", "1", "a1")
	var exit exitError
	require.True(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, exitFailed, exit.code)
	assert.NotContains(t, text, "first")
	assert.Regexp(t, `(?m)^\s+2 .*second\s+hi\\x1b\[2J$`, text)
	assert.Regexp(t, `(?m)^\s+3 .*third`, text)
	assert.Contains(t, text, "attempt a1 failed (sandbox_worker_failed)")
	assert.NotContains(t, text, "\x1b")

	text, _ = run("--json", "--after", "2", "a1")
	var lines []messages.StreamLine
	scanner := bufio.NewScanner(bytes.NewBufferString(text))
	for scanner.Scan() {
		var line messages.StreamLine
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line), scanner.Text())
		lines = append(lines, line)
	}
	require.Len(t, lines, 2)
	assert.Equal(t, 3, lines[0].Seq)
	assert.Equal(t, "third", lines[0].Event.EventType)
	assert.Equal(t, messages.StreamLineFinished, lines[1].Type)

	_, err = run("--after", "9", "a1")
	assert.ErrorContains(t, err, "query_invalid")
	_, err = run("nobody")
	assert.ErrorContains(t, err, "attempt_not_found")
}
