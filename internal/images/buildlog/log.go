package buildlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/forgedev/forged/internal/kit/atomicfile"
)

// Bounds of a build log.
const (
	// MaxBytes bounds the stored log; lines past it are dropped.
	MaxBytes = 4 << 20
	// TailBytes bounds the tail quoted in events and failure messages.
	TailBytes = 2 << 10
)

// Log collects one build's redacted output: the head up to MaxBytes for
// the stored copy and the last TailBytes for events. It is not safe for
// concurrent use.
type Log struct {
	redactor  *Redactor
	max       int
	head      bytes.Buffer
	tail      []byte
	truncated bool
	dropped   int64
}

// New returns an empty log redacting with r (nil: patterns only).
func New(r *Redactor) *Log { return &Log{redactor: r, max: MaxBytes} }

// Line records one line of output (without its newline).
func (l *Log) Line(line string) {
	line = l.redactor.Redact(strings.TrimRight(line, "\n")) + "\n"
	if l.head.Len()+len(line) > l.max {
		l.truncated = true
		l.dropped += int64(len(line))
	} else {
		l.head.WriteString(line)
	}
	l.tail = append(l.tail, line...)
	if over := len(l.tail) - TailBytes; over > 0 {
		l.tail = l.tail[over:]
	}
}

// Truncated reports whether lines were dropped at MaxBytes.
func (l *Log) Truncated() bool { return l.truncated }

// Content is the stored form: the retained head, and a closing note when
// lines were dropped.
func (l *Log) Content() []byte {
	if !l.truncated {
		return l.head.Bytes()
	}
	return fmt.Appendf(bytes.Clone(l.head.Bytes()), "[build log truncated at %d bytes; %d bytes dropped]\n", l.max, l.dropped)
}

// Digest is "sha256:<hex>" of Content.
func (l *Log) Digest() string {
	sum := sha256.Sum256(l.Content())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Tail is the last TailBytes of the log (whole runes, from the start of a
// line when one begins inside it), or "" when nothing was logged.
func (l *Log) Tail() string {
	t := l.tail
	if len(t) == TailBytes {
		if i := bytes.IndexByte(t, '\n'); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
	}
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return strings.TrimSpace(string(t))
}

// Record says where a log was stored.
type Record struct {
	Path      string `json:"path"`
	Digest    string `json:"digest"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
}

// Dir is where the build logs of cache key live under the state root.
func Dir(stateRoot, key string) string {
	return filepath.Join(stateRoot, "build-logs", key)
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Save stores the log at Dir(stateRoot, key)/name.log, atomically, mode
// 0600 in directories of mode 0700. key and name are single path elements.
func (l *Log) Save(stateRoot, key, name string) (Record, error) {
	if !safeName.MatchString(key) || !safeName.MatchString(name) || strings.Contains(key+name, "..") {
		return Record{}, fmt.Errorf("build log: unsafe key %q or name %q", key, name)
	}
	dir := Dir(stateRoot, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Record{}, fmt.Errorf("build log: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return Record{}, fmt.Errorf("build log: %w", err)
	}
	content := l.Content()
	path := filepath.Join(dir, name+".log")
	if err := atomicfile.Write(path, content, 0o600); err != nil {
		return Record{}, fmt.Errorf("build log: %w", err)
	}
	return Record{Path: path, Digest: l.Digest(), Bytes: len(content), Truncated: l.truncated}, nil
}
