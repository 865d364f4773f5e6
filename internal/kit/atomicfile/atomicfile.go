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
// Temporary files are named ".tmp-<name>.<random>": listings that skip dot
// files never mistake one for a record, and IsTemporary recognises those an
// interrupted write left behind.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write replaces path with data, with mode perm, durably. On failure the
// target is left as it was and the temporary file is removed.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("temporary name: %w", err)
	}
	tmp := filepath.Join(dir, ".tmp-"+name+"."+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := writeSynced(f, data, perm); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
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
