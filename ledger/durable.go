package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

// writeDurable replaces dir/name with data: a fresh temporary file in dir
// (created exclusively, 0600, never through a link) is written, synced and
// closed, renamed over the target, and dir is synced so that the rename
// itself survives a crash.
func writeDurable(dir, name string, data []byte) (err error) {
	if err := ensureDir(dir); err != nil {
		return err
	}
	tmp, err := tempName(dir, name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, fileMode)
	if err != nil {
		return ioError(err, "create %s", tmp)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := writeAll(f, data); err != nil {
		_ = f.Close()
		return ioError(err, "write %s", tmp)
	}
	if err := f.Close(); err != nil {
		return ioError(err, "close %s", tmp)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return ioError(err, "rename %s", tmp)
	}
	return syncDir(dir)
}

// writeAll sets the file's mode (whatever the umask), writes data and
// syncs it to stable storage.
func writeAll(f *os.File, data []byte) error {
	if err := f.Chmod(fileMode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// tempName is a new, unpredictable temporary name for name in dir. It
// starts with a dot so that listings never mistake it for a record.
func tempName(dir, name string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", ioError(err, "random temporary name")
	}
	return filepath.Join(dir, fmt.Sprintf(".%s.%s.tmp", name, hex.EncodeToString(b[:]))), nil
}

// syncDir fsyncs a directory so that renames and removals in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return ioError(err, "open %s", dir)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
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
			if !entry.Type().IsRegular() || !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".tmp") {
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
