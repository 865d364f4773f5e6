package worker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// TestMainLogsEveryEventLine checks the event log a restarted host resumes
// from: the very lines of stdout, in order, each verifying in sequence
// under the attempt's event key, and private to the worker's uid.
func TestMainLogsEveryEventLine(t *testing.T) {
	f := newFixture(t, sh("echo one; echo two >&2; echo three > file.txt")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	log, err := os.ReadFile(f.cfg.EventLogPath)
	require.NoError(t, err)
	assert.Equal(t, res.stdout, string(log), "the log holds exactly the lines streamed")
	events, err := messages.ParseEventLog(messages.EventKey(testLeaseKey), log)
	require.NoError(t, err)
	require.Len(t, events, len(res.events))
	for i, ev := range events {
		assert.Equal(t, res.events[i].EventType, ev.Event.EventType)
	}
	info, err := os.Stat(f.cfg.EventLogPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// TestMainEmptiesAStaleLogAndRunsWithoutOne: a log left by anything
// before the worker is replaced, and a log that cannot be created costs
// the run nothing.
func TestMainEmptiesAStaleLogAndRunsWithoutOne(t *testing.T) {
	f := newFixture(t, sh("true")...)
	require.NoError(t, os.WriteFile(f.cfg.EventLogPath, []byte("planted by someone\n"), 0o600))
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	log, err := os.ReadFile(f.cfg.EventLogPath)
	require.NoError(t, err)
	_, err = messages.ParseEventLog(messages.EventKey(testLeaseKey), log)
	require.NoError(t, err)

	g := newFixture(t, sh("true")...)
	g.cfg.EventLogPath = filepath.Join(g.root, "missing-dir", "events.log")
	res = g.run()
	require.Equal(t, ExitOK, res.code)
	assert.Contains(t, res.stderr, "cannot re-adopt")
	assert.NotEmpty(t, res.events, "the stream is unaffected")
}

// TestEmitterStopsLoggingAtTheBound: the log never passes its bound; the
// stream goes on.
func TestEmitterStopsLoggingAtTheBound(t *testing.T) {
	var stdout, log limitedBuffer
	e := newEmitter(&stdout, -1)
	e.setKey([]byte("k"))
	e.setLog(&log)
	e.logged = messages.MaxEventLogBytes - 10
	e.lifecycle("worker_started", "a line longer than ten bytes", nil)
	e.lifecycle("after", "still streamed", nil)
	assert.Zero(t, log.n, "nothing is logged past the bound")
	assert.Equal(t, 2, stdout.lines)
}

type limitedBuffer struct{ n, lines int }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.n += len(p)
	b.lines++
	return len(p), nil
}

// TestEveryNumberedLineIsLogged: task output lines and lifecycle events
// share one sequence, and the log holds every one of them in order, so a
// re-attached host can read it (a task line missing from the log made it
// refuse the log: "line 3 carries sequence number 4").
func TestEveryNumberedLineIsLogged(t *testing.T) {
	var stdout, log bytes.Buffer
	key := []byte("k")
	e := newEmitter(&stdout, -1)
	e.setKey(key)
	e.setLog(&log)
	e.lifecycle("worker_started", "started", nil)
	e.taskOutput("stdout", "one")
	e.lifecycle("task_exited", "exited", nil)
	e.taskOutput("stderr", "two")
	assert.Equal(t, stdout.String(), log.String(), "the log holds exactly the numbered lines the stream got")
	events, err := messages.ParseEventLog(key, log.Bytes())
	require.NoError(t, err)
	require.Len(t, events, 4)
	assert.Equal(t, "one", events[1].Event.Content)
	assert.Equal(t, uint64(3), events[3].Seq)
}
