package ledger

import (
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/forgedev/forged/failure"
)

// Permissions of the state directories and files.
const (
	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600
)

// ensureDir creates dir (and its parents) with mode 0700 when missing. An
// existing dir must be a real directory, not a symbolic link; its mode is
// tightened to 0700 if it is looser.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return ioError(err, "create %s", dir)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return ioError(err, "inspect %s", dir)
	}
	if !info.IsDir() {
		return failure.New(CodeStateIO, "%s is not a directory (a symbolic link is refused)", dir)
	}
	if info.Mode().Perm()&^dirMode != 0 {
		if err := os.Chmod(dir, dirMode); err != nil {
			return ioError(err, "restrict %s to 0700", dir)
		}
	}
	return nil
}

// writeDurable replaces dir/name with data through the one atomic writer
// (internal/atomicfile): a temporary file in dir, synced, 0600, renamed over
// the target (never through a link), and dir synced so that the rename
// itself survives a crash.
func writeDurable(dir, name string, data []byte) error {
	if err := ensureDir(dir); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, name), data, fileMode); err != nil {
		return ioError(err, "write %s", name)
	}
	return nil
}

// syncDir fsyncs a directory so that renames and removals in it are
// durable.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return ioError(err, "sync %s", dir)
	}
	return nil
}

// removeDurable removes dir/name (a missing file is not an error) and
// syncs dir.
func removeDurable(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return ioError(err, "remove %s", name)
	}
	return syncDir(dir)
}

// errTooLarge, errNotRegular and errChanged say why readBounded refused a
// file.
var (
	errTooLarge   = errors.New("file is larger than allowed")
	errNotRegular = errors.New("not a regular file (symbolic links are never followed)")
	errChanged    = errors.New("file changed while being opened")
)

// readBounded reads a regular file of at most max bytes without following
// a symbolic link: the path is checked with Lstat, opened with O_NOFOLLOW
// (and O_NONBLOCK, so that a swapped-in FIFO cannot block), and the open
// file must be the one inspected.
func readBounded(path string, max int64) ([]byte, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errNotRegular
	}
	if info.Size() > max {
		return nil, errTooLarge
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errNotRegular
		}
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !opened.Mode().IsRegular() || !os.SameFile(info, opened) {
		return nil, errChanged
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

// ioError is a CodeStateIO error wrapping err.
func ioError(err error, format string, args ...any) error {
	return failure.Wrap(CodeStateIO, err, "%s", fmt.Sprintf(format, args...))
}

// RemoveTemporaryFiles deletes the temporary files that a process killed
// mid-write left in the ledger and report directories. Call it only when
// no other process writes to this state root (forged does, at start-up,
// holding its Docker context lock). It returns how many it removed.
func (s Store) RemoveTemporaryFiles() (int, error) {
	removed := 0
	for _, dir := range []string{s.LedgerDir(), s.ReportDir()} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, ioError(err, "list %s", dir)
		}
		for _, entry := range entries {
			name := entry.Name()
			// atomicfile's temporaries, and the ".<name>.<hex>.tmp" ones of
			// forged versions before it.
			legacy := strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
			if !entry.Type().IsRegular() || !(atomicfile.IsTemporary(name) || legacy) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, ioError(err, "remove %s", name)
			}
			removed++
		}
	}
	return removed, nil
}
