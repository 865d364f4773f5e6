package worker

import (
	"io"
	"strings"
	"sync"
	"time"

	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Task output events.
const (
	// MaxEventLineBytes bounds the content of one task_output event; longer
	// lines are truncated.
	MaxEventLineBytes = 16 << 10
	taskOutputEvent   = "task_output"
)

// emitter writes runner events as JSON lines on the worker's stdout, each
// signed with the attempt's event key and numbered (messages.SignEventLine),
// so that the host can tell them from lines the task writes into the same
// stream. It is safe for concurrent use; write errors are remembered and
// further events dropped (the host sees the stream end).
type emitter struct {
	mu        sync.Mutex
	w         io.Writer
	key       []byte // the event key; nil until the start packet is read
	seq       uint64 // the number of the next line
	err       error
	maxOutput int64 // bytes of task_output lines written at most; negative: unlimited
	output    int64
	dropped   bool
	activeAt  time.Time // the last task_active event
	// log, when set, receives every line before w does (the event log in
	// the control volume, messages.EventLogPath), up to
	// messages.MaxEventLogBytes; a write error stops logging, never the
	// run (the host then cannot re-adopt past the log's end).
	log       io.Writer
	logged    int64
	logFailed bool
}

// activeEvery bounds how often task_active is emitted: often enough for
// the host's idle limit (at least 60 s), rarely enough to cost nothing.
const activeEvery = 20 * time.Second

// active tells the host that the task still writes output while the
// output budget is spent (its lines are dropped), so that the host's idle
// limit does not stop a task that is not idle. At most one event per
// activeEvery.
func (e *emitter) active() {
	e.mu.Lock()
	now := time.Now()
	due := now.Sub(e.activeAt) >= activeEvery
	if due {
		e.activeAt = now
	}
	e.mu.Unlock()
	if due {
		e.lifecycle("task_active", "the task still writes output beyond the forwarded budget", nil)
	}
}

func newEmitter(w io.Writer, maxOutput int64) *emitter {
	return &emitter{w: w, maxOutput: maxOutput}
}

// setKey sets the key that signs every further line.
func (e *emitter) setKey(key []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.key = key
}

// lifecycle emits a worker lifecycle event (role "runner").
func (e *emitter) lifecycle(eventType, content string, data any) {
	e.emit(messages.RunnerEvent(eventType, content, data))
}

// taskOutput emits one line of task output (role "agent"). It returns
// false when the line was dropped because the output budget is spent; the
// first such line reports true for firstDrop. The budget counts the bytes
// of the signed lines written, as the host counts the worker's stdout.
func (e *emitter) taskOutput(stream, line string) (sent, firstDrop bool) {
	data := `{"stream":"` + stream + `"}`
	ev := messages.Event{
		Role:       messages.RoleAgent,
		Kind:       messages.KindCheckpoint,
		EventType:  taskOutputEvent,
		Content:    boundLine(line, MaxEventLineBytes),
		Data:       &data,
		OccurredAt: time.Now().UTC(),
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return false, false
	}
	raw, err := messages.SignEventLine(e.key, e.seq, ev)
	if err != nil {
		return false, false
	}
	if e.maxOutput >= 0 && e.output+int64(len(raw)) > e.maxOutput {
		first := !e.dropped
		e.dropped = true
		return false, first
	}
	e.output += int64(len(raw))
	e.seq++
	e.appendLog(raw) // every numbered line is in the log: a re-attached host reads it in sequence
	_, e.err = e.w.Write(raw)
	return true, false
}

// emit writes one {"type":"runner_event","seq":n,"event":{...},"mac":"..."}
// line; lines are numbered in the order they are written.
func (e *emitter) emit(ev messages.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	raw, err := messages.SignEventLine(e.key, e.seq, ev)
	if err != nil {
		return
	}
	e.seq++
	e.appendLog(raw)
	_, e.err = e.w.Write(raw)
}

// setLog makes every further line go to log first.
func (e *emitter) setLog(log io.Writer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = log
}

// appendLog appends one line to the event log while it is within its
// bound; e.mu is held.
func (e *emitter) appendLog(raw []byte) {
	if e.log == nil || e.logFailed {
		return
	}
	if e.logged+int64(len(raw)) > messages.MaxEventLogBytes {
		e.logFailed = true
		return
	}
	n, err := e.log.Write(raw)
	e.logged += int64(n)
	if err != nil {
		e.logFailed = true
	}
}

// boundLine makes line valid UTF-8 and cuts it to at most max bytes on a
// rune boundary.
func boundLine(line string, max int) string {
	return text.Clip(strings.ToValidUTF8(line, "\uFFFD"), max)
}
