package dockerops

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/forgedev/forged/internal/kit/text"
)

// outputLimitError reports that the worker produced more output than the
// supervisor captures.
type outputLimitError struct{ msg string }

func (e *outputLimitError) Error() string { return e.msg }

// callbackError carries the error of the caller's line callback through
// the stream demultiplexer.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// lineWriter splits the worker's stdout into lines for onLine, bounding
// both the line length and the total volume. It is used from one
// goroutine at a time.
type lineWriter struct {
	onLine   func([]byte) error
	maxLine  int
	maxTotal int64
	total    int64
	partial  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if w.total > w.maxTotal {
		return 0, &outputLimitError{fmt.Sprintf("worker stdout exceeded the %d byte capture budget", w.maxTotal)}
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > w.maxLine {
				return 0, w.lineTooLong()
			}
			w.partial = append(w.partial, p...)
			break
		}
		if len(w.partial)+i > w.maxLine {
			return 0, w.lineTooLong()
		}
		line := append(w.partial, p[:i]...)
		p = p[i+1:]
		w.partial = line[:0]
		if err := w.emit(line); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush delivers a final line that was not newline-terminated.
func (w *lineWriter) flush() error {
	if len(w.partial) == 0 {
		return nil
	}
	line := w.partial
	w.partial = nil
	return w.emit(line)
}

func (w *lineWriter) emit(line []byte) error {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if err := w.onLine(bytes.Clone(line)); err != nil {
		return &callbackError{err}
	}
	return nil
}

func (w *lineWriter) lineTooLong() error {
	return &outputLimitError{fmt.Sprintf("worker stdout line exceeded %d bytes", w.maxLine)}
}

// tailWriter keeps the last keep bytes of the worker's stderr, on whole
// runes, and bounds its total volume. It holds up to utf8.UTFMax-1 bytes
// beyond keep, so that String can start the tail on a rune boundary.
type tailWriter struct {
	keep     int
	maxTotal int64
	total    int64
	buf      []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if w.total > w.maxTotal {
		return 0, &outputLimitError{fmt.Sprintf("worker stderr exceeded the %d byte capture budget", w.maxTotal)}
	}
	held := w.keep + utf8.UTFMax - 1
	if len(p) >= held {
		w.buf = append(w.buf[:0], p[len(p)-held:]...)
		return len(p), nil
	}
	if drop := len(w.buf) + len(p) - held; drop > 0 {
		w.buf = append(w.buf[:0], w.buf[drop:]...)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *tailWriter) String() string { return text.Tail(string(w.buf), w.keep) }
