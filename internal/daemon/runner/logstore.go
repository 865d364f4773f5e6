package runner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/messages"
)

// The durable event logs: each attempt's log is also written to a file of
// the state root, STATE_ROOT/events/<sha256(attempt id)>.ndjson (0600, in
// a 0700 directory), so that a daemon that restarts (a crash, kill -9, an
// upgrade) still serves the events of the attempts the previous process
// ran, with the same sequence numbers, and a client that reconnects with
// the last sequence number it saw gets the rest, once.
//
// The file is NDJSON: a header line (the attempt id and when it was
// submitted), one line per event with its sequence number (1, 2, …, in
// order, no gaps), and, once the attempt finished, its outcome. An event
// is written before it is served, so a client never saw an event the file
// lacks. The writes are not synced one by one (a kill of the process
// keeps them; a crash of the host may lose the last ones); the outcome is.
//
// Bounds: the file holds at most twice the log's limit of events; past
// that it is rewritten (atomicfile) with the header and the events the log
// keeps in memory (its last limit events). A finished attempt's file is
// removed when its log is forgotten (RetainFinished, RetainFor). A torn
// last line (the process died while writing it) or a line out of sequence
// ends the log where it breaks: the file is cut there and the rest is lost,
// never misread.

// EventsDir is the durable event logs' directory in the state root.
const EventsDir = "events"

// maxLogLine bounds one line of a log file when it is read back.
const maxLogLine = 16 << 20

// logRecord is one line of a log file: the header (AttemptID, OpenedAt),
// an event (Seq, Event), or the outcome (Outcome, FinishedAt).
type logRecord struct {
	AttemptID  string                   `json:"attemptId,omitempty"`
	OpenedAt   *time.Time               `json:"openedAt,omitempty"`
	Seq        int                      `json:"seq,omitempty"`
	Event      *messages.Event          `json:"event,omitempty"`
	Outcome    *messages.AttemptOutcome `json:"outcome,omitempty"`
	FinishedAt *time.Time               `json:"finishedAt,omitempty"`
}

// logFile is a Log's durable copy. Its fields are guarded by the Log's mu.
type logFile struct {
	path  string
	f     *os.File // open for appending while the attempt runs; nil once finished, closed or failed
	lines int      // event lines in the file
}

// OpenLogs returns the set of logs kept durably in dir (created 0700 when
// missing), with the logs a previous process left there loaded: those of
// finished attempts still within the retention, and those of attempts it
// was running, which the daemon's start then resumes (re-adopted) or
// finishes (reaped). A file that cannot be read back is removed. limit is
// as NewLogs'.
func OpenLogs(dir string, limit int) (*Logs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner: event logs: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("runner: event logs: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("runner: event logs: %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("runner: event logs: %w", err)
	}
	logs := NewLogs(limit)
	logs.dir = dir
	for _, entry := range entries {
		path := filepath.Join(dir, entry.Name())
		if atomicfile.IsTemporary(entry.Name()) {
			_ = os.Remove(path) // an interrupted rewrite's
			continue
		}
		if !strings.HasSuffix(entry.Name(), ".ndjson") {
			continue
		}
		log, err := loadLog(path, logs.limit, logs.now)
		if err != nil || logFileName(log.id) != entry.Name() {
			_ = os.Remove(path)
			continue
		}
		logs.byID[log.id] = log
	}
	logs.mu.Lock()
	logs.evictLocked()
	logs.mu.Unlock()
	return logs, nil
}

// logFileName is the file of an attempt's log: the attempt id is the
// dispatch's, so it is hashed rather than trusted as a name.
func logFileName(attemptID string) string {
	sum := sha256.Sum256([]byte(attemptID))
	return hex.EncodeToString(sum[:]) + ".ndjson"
}

// loadLog reads a log file back: its header, its events in sequence (the
// last limit kept), and its outcome. It stops at the first line that does
// not decode or breaks the sequence, and cuts the file there. The log of a
// running attempt keeps its file open for appending.
func loadLog(path string, limit int, now func() time.Time) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, errors.New("not a regular file")
	}
	log, good, err := readLog(f, limit, now)
	if err != nil {
		f.Close()
		return nil, err
	}
	log.file = &logFile{path: path, lines: len(log.events)}
	if good < info.Size() {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, err
		}
	}
	if log.outcome != nil {
		f.Close()
		return log, nil
	}
	log.file.f = f
	return log, nil
}

// readLog decodes a log file; good is the length of its well-formed part.
func readLog(r io.Reader, limit int, now func() time.Time) (log *Log, good int64, err error) {
	reader := bufio.NewReaderSize(r, 64<<10)
	line, err := readLine(reader)
	if err != nil {
		return nil, 0, fmt.Errorf("no header: %w", err)
	}
	var head logRecord
	if json.Unmarshal(line, &head) != nil || head.AttemptID == "" || head.OpenedAt == nil {
		return nil, 0, errors.New("the header does not decode")
	}
	good = int64(len(line)) + 1
	log = &Log{id: head.AttemptID, limit: limit, now: now, opened: *head.OpenedAt, changed: make(chan struct{})}
	next := 0 // the sequence number the next event must carry (0: the first event sets it)
	for {
		line, err := readLine(reader)
		if err != nil {
			return log, good, nil
		}
		var rec logRecord
		if json.Unmarshal(line, &rec) != nil {
			return log, good, nil
		}
		switch {
		case rec.Outcome != nil && rec.FinishedAt != nil:
			log.outcome, log.finished = rec.Outcome, *rec.FinishedAt
			return log, good + int64(len(line)) + 1, nil
		case rec.Event != nil && rec.Seq >= 1 && (next == 0 || rec.Seq == next):
			if next == 0 {
				log.dropped = rec.Seq - 1
			}
			next = rec.Seq + 1
			if len(log.events) >= limit {
				log.events = log.events[1:]
				log.dropped++
			}
			log.events = append(log.events, *rec.Event)
			good += int64(len(line)) + 1
		default:
			return log, good, nil
		}
	}
}

// readLine reads one whole line (without its newline), at most maxLogLine
// bytes; a last line without its newline is torn, an error.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	for {
		chunk, err := r.ReadSlice('\n')
		buf.Write(chunk)
		if buf.Len() > maxLogLine {
			return nil, errors.New("line too long")
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// createFile starts the durable copy of a new log; on failure the log is
// kept in memory only.
func (l *Log) createFile(dir string) {
	path := filepath.Join(dir, logFileName(l.id))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	l.file = &logFile{path: path, f: f}
	opened := l.opened
	if !l.writeLocked(logRecord{AttemptID: l.id, OpenedAt: &opened}) {
		l.file = nil
	}
}

// writeLocked appends one record to the file; a failed write gives the
// durable copy up (it is removed: a copy with a hole would be misread).
func (l *Log) writeLocked(rec logRecord) bool {
	if l.file == nil || l.file.f == nil {
		return false
	}
	line, err := json.Marshal(rec)
	if err == nil {
		_, err = l.file.f.Write(append(line, '\n'))
	}
	if err != nil {
		l.removeFileLocked()
		return false
	}
	return true
}

// appendFileLocked writes the event of sequence number seq, and rewrites
// the file with the kept events once it holds twice the limit.
func (l *Log) appendFileLocked(seq int, ev messages.Event) {
	if !l.writeLocked(logRecord{Seq: seq, Event: &ev}) {
		return
	}
	l.file.lines++
	if l.file.lines < 2*l.limit {
		return
	}
	opened := l.opened
	err := atomicfile.WriteFunc(l.file.path, 0o600, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		if err := enc.Encode(logRecord{AttemptID: l.id, OpenedAt: &opened}); err != nil {
			return err
		}
		for i := range l.events {
			if err := enc.Encode(logRecord{Seq: l.dropped + i + 1, Event: &l.events[i]}); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err == nil {
		l.file.f.Close()
		l.file.f, err = os.OpenFile(l.file.path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
		l.file.lines = len(l.events)
	}
	if err != nil {
		l.removeFileLocked()
	}
}

// finishFileLocked writes the outcome, synced, and closes the file.
func (l *Log) finishFileLocked(out messages.AttemptOutcome, at time.Time) {
	if !l.writeLocked(logRecord{Outcome: &out, FinishedAt: &at}) {
		return
	}
	if err := l.file.f.Sync(); err != nil {
		l.removeFileLocked()
		return
	}
	l.file.f.Close()
	l.file.f = nil
}

// removeFileLocked closes and removes the durable copy.
func (l *Log) removeFileLocked() {
	if l.file == nil {
		return
	}
	if l.file.f != nil {
		l.file.f.Close()
	}
	_ = os.Remove(l.file.path)
	l.file = nil
}

// closeFile closes the file without removing it (the process is going
// away; the next one reads it back).
func (l *Log) closeFile() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil && l.file.f != nil {
		l.file.f.Close()
		l.file.f = nil
	}
}

// removeFile removes the durable copy (the log is forgotten).
func (l *Log) removeFile() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeFileLocked()
}

// Close closes the files of the logs still running, which stay on disk
// for the next process. Logs appended to afterwards are kept in memory only.
func (l *Logs) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, log := range l.byID {
		log.closeFile()
	}
	return nil
}
