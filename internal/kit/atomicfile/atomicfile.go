// Package atomicfile is forged's one way to replace a file so that a crash
// leaves either the old or the new content, never a torn file: the data is
// written to a fresh temporary file in the same directory (created
// exclusively, never through a link), given its mode whatever the umask,
// synced, renamed over the target, and the directory is synced so that the
// rename itself survives a crash.
//
// The rename replaces whatever non-directory is at the target, a symbolic
// link included, and never follows it: inside the sandbox the task may
// plant a link at a path the host writes, and the write must still land
// where it was meant to. (github.com/moby/sys/atomicwriter refuses such a
// target instead, which would let the task block lease updates; that is
// why this package exists.)
//
// Write and WriteFunc replace a file; Create makes one only where none is
// yet (an identity minted once, such as the runner id).
//
// Temporary files are named ".tmp-<name>.<random>": listings that skip dot
// files never mistake one for a record, and IsTemporary recognises those an
// interrupted write left behind.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write replaces path with data, with mode perm, durably. On failure the
// target is left as it was and the temporary file is removed.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, writeAll(data))
}

// WriteFunc is Write for content that is streamed rather than held: fill
// writes it to the temporary file (unbuffered: wrap it in a bufio.Writer
// for many small writes, and flush before returning). An error from fill
// is returned as it is, and the target is left as it was.
func WriteFunc(path string, perm os.FileMode, fill func(io.Writer) error) error {
	dir, tmp, err := writeTemp(path, perm, fill)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// Create writes data to path, with mode perm, durably, only if nothing is
// at path yet: it never replaces a file, so that of two concurrent
// creators exactly one wins. The file appears whole or not at all (it is
// written and synced under a temporary name, then linked into place). When
// path exists, the error satisfies errors.Is(err, fs.ErrExist) and path is
// left as it was.
func Create(path string, data []byte, perm os.FileMode) error {
	dir, tmp, err := writeTemp(path, perm, writeAll(data))
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	_ = os.Remove(tmp)
	if err != nil {
		return err
	}
	return SyncDir(dir)
}

// writeTemp writes fill's content, synced and with mode perm, to a fresh
// temporary file beside path and returns its directory and name. On
// failure nothing is left behind.
func writeTemp(path string, perm os.FileMode, fill func(io.Writer) error) (dir, tmp string, err error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("temporary name: %w", err)
	}
	tmp = filepath.Join(dir, ".tmp-"+name+"."+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return "", "", err
	}
	if err := writeSynced(f, perm, fill); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return "", "", err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return "", "", err
	}
	return dir, tmp, nil
}

func writeSynced(f *os.File, perm os.FileMode, fill func(io.Writer) error) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := fill(f); err != nil {
		return err
	}
	return f.Sync()
}

func writeAll(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// SyncDir fsyncs a directory so that renames and removals in it are
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// IsTemporary reports whether name is a temporary file Write creates.
func IsTemporary(name string) bool { return strings.HasPrefix(name, ".tmp-") }
