package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

func event(n int) messages.Event {
	return messages.Event{Role: "runner", Kind: messages.KindCheckpoint, EventType: "e" + strings.Repeat("x", n%3), Content: "event " + string(rune('a'+n%26)), OccurredAt: time.Unix(int64(n), 0).UTC()}
}

// readAll returns the log's events after seq from, with their numbers.
func readAll(log *Log, from int) (seqs []int, events []messages.Event) {
	events, _, end, _ := log.Read(from)
	for i := range events {
		seqs = append(seqs, end-len(events)+i+1)
	}
	return seqs, events
}

// TestDurableLogsAreReadBackAfterARestart: the logs of a process that died
// without closing them (kill -9) are read back by the next one: the
// running attempt's log goes on from the sequence it reached, the finished
// attempt's log keeps its outcome and its id stays refused.
func TestDurableLogsAreReadBackAfterARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), EventsDir)
	first, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	running, ok := first.Open(logID(1))
	require.True(t, ok)
	for i := 1; i <= 3; i++ {
		running.Append(event(i))
	}
	done, ok := first.Open(logID(2))
	require.True(t, ok)
	done.Append(event(9))
	done.Finish(messages.AttemptOutcome{AttemptID: logID(2), Status: messages.StatusSucceeded})
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	file, err := os.Stat(filepath.Join(dir, logFileName(logID(1))))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), file.Mode().Perm())

	// The first process is killed: nothing is closed.
	second, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	log, ok := second.Get(logID(1))
	require.True(t, ok, "a running attempt's log is served after a restart")
	seqs, events := readAll(log, 0)
	assert.Equal(t, []int{1, 2, 3}, seqs)
	assert.Equal(t, []messages.Event{event(1), event(2), event(3)}, events)
	seqs, _ = readAll(log, 2)
	assert.Equal(t, []int{3}, seqs, "after a cursor, the rest")
	resumed, ok := second.resume(logID(1))
	require.True(t, ok)
	assert.Same(t, log, resumed, "a re-adopted attempt goes on in its log")
	resumed.Append(event(4))
	assert.Equal(t, []string{logID(1)}, second.unfinished())

	finished, ok := second.Get(logID(2))
	require.True(t, ok, "a finished attempt's log is served after a restart")
	_, outcome, end, _ := finished.Read(0)
	require.NotNil(t, outcome)
	assert.Equal(t, messages.StatusSucceeded, outcome.Status)
	assert.Equal(t, 1, end)
	_, ok = second.Open(logID(2))
	assert.False(t, ok, "a finished attempt's id stays refused across a restart")
	_, ok = second.resume(logID(2))
	assert.False(t, ok, "a finished log is not resumed")
	require.NoError(t, second.Close())

	third, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	log, ok = third.Get(logID(1))
	require.True(t, ok)
	seqs, events = readAll(log, 0)
	assert.Equal(t, []int{1, 2, 3, 4}, seqs, "the event appended after the restart is numbered on")
	assert.Equal(t, event(4), events[3])
	out, ok := third.recordRestarted(logID(1), reaper.AdoptVerdict{})
	require.True(t, ok)
	assert.Equal(t, "sandbox_runner_restarted", out.Code)
	_, outcome, _, _ = log.Read(0)
	require.NotNil(t, outcome, "a reaped attempt's log is finished in place")
	assert.Empty(t, third.unfinished())
}

// TestDurableLogCutsATornLine: a process killed while writing a line
// leaves it torn; the next one reads the log up to it, cuts it off, and
// numbers the next event after the last whole one. A line out of sequence
// ends the log the same way.
func TestDurableLogCutsATornLine(t *testing.T) {
	dir := t.TempDir()
	logs, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	log, _ := logs.Open(logID(1))
	log.Append(event(1))
	log.Append(event(2))
	path := filepath.Join(dir, logFileName(logID(1)))
	appendRaw(t, path, `{"seq":3,"event":{"role":"run`)

	again, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	log, ok := again.Get(logID(1))
	require.True(t, ok)
	seqs, _ := readAll(log, 0)
	assert.Equal(t, []int{1, 2}, seqs)
	log.Append(event(3))
	appendRaw(t, path, `{"seq":7,"event":{"role":"runner"}}`+"\n"+`{"seq":4,"event":{"role":"runner"}}`+"\n")

	third, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	log, ok = third.Get(logID(1))
	require.True(t, ok)
	seqs, events := readAll(log, 0)
	assert.Equal(t, []int{1, 2, 3}, seqs, "the line out of sequence and what follows it are cut")
	assert.Equal(t, event(3), events[2])
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), `"seq":7`)
}

// TestDurableLogIsBounded: the file holds at most twice the limit of
// events; read back, the log keeps the last limit of them, numbered as
// they were.
func TestDurableLogIsBounded(t *testing.T) {
	dir := t.TempDir()
	logs, err := OpenLogs(dir, 4)
	require.NoError(t, err)
	log, _ := logs.Open(logID(1))
	path := filepath.Join(dir, logFileName(logID(1)))
	for i := 1; i <= 21; i++ {
		log.Append(event(i))
		assert.LessOrEqual(t, countLines(t, path)-1, 8, "event lines after event %d", i)
	}
	again, err := OpenLogs(dir, 4)
	require.NoError(t, err)
	log, ok := again.Get(logID(1))
	require.True(t, ok)
	seqs, events := readAll(log, 0)
	assert.Equal(t, []int{18, 19, 20, 21}, seqs)
	assert.Equal(t, event(21), events[3])
	seqs, _ = readAll(log, 19)
	assert.Equal(t, []int{20, 21}, seqs)
}

// TestDurableLogIsRemovedWithItsLog: a finished log forgotten by the
// retention, and a refused submission's, leave no file; files that are not
// an attempt's log under its own name are removed at start.
func TestDurableLogIsRemovedWithItsLog(t *testing.T) {
	clock := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	logs, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	logs.now = clock.now
	log, _ := logs.Open(logID(1))
	log.Append(event(1))
	log.Finish(messages.AttemptOutcome{AttemptID: logID(1), Status: messages.StatusFailed})
	refused, _ := logs.Open(logID(2))
	logs.discard(logID(2), refused)
	assert.NoFileExists(t, filepath.Join(dir, logFileName(logID(2))))
	require.FileExists(t, filepath.Join(dir, logFileName(logID(1))))
	clock.advance(RetainFor + time.Second)
	_, ok := logs.Get(logID(1))
	assert.False(t, ok)
	assert.NoFileExists(t, filepath.Join(dir, logFileName(logID(1))))

	// Another attempt's log under a stolen name, and a file with no header.
	other, _ := logs.Open(logID(3))
	other.Append(event(1))
	require.NoError(t, logs.Close())
	require.NoError(t, os.Rename(filepath.Join(dir, logFileName(logID(3))), filepath.Join(dir, logFileName(logID(4)))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, logFileName(logID(5))), []byte("not json\n"), 0o600))
	again, err := OpenLogs(dir, 0)
	require.NoError(t, err)
	for _, n := range []int{3, 4, 5} {
		_, ok := again.Get(logID(n))
		assert.False(t, ok, "attempt %d", n)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func appendRaw(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Count(string(raw), "\n")
}
