package worker

import (
	"os"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// The result step's stat cache: staging the result would otherwise read
// and hash every file of the working tree (4.5 s for 30,000 files in the
// sandbox), where `git status` trusts its index's stat data. The worker
// keeps the stat data of every file its checkout wrote, with the file's
// blob, in its own memory (the task's index is the task's, and not
// trusted), and at result time reuses a blob without reading the file
// when the file's lstat is exactly what the checkout recorded: device,
// inode, mode, owner, size, mtime and ctime, to the nanosecond.
//
// Why a file the task changed cannot match. The task can set a file's
// mtime (utimensat) and choose its size, but not its ctime: every change
// to a file's content or metadata (write, truncate, a write fault through
// a shared mapping, utimensat, chmod, link, rename) sets its ctime to the
// kernel's current time, which an unprivileged process cannot set (no
// CAP_SYS_TIME in the sandbox; time namespaces do not cover the real-time
// clock), and no call sets a ctime to a chosen value. A file replaced by
// another (rename, a new file in a recycled inode) has another inode or a
// fresh ctime. What remains is git's "racy" case: a change in the same
// clock tick as the checkout's write leaves the ctime unchanged (ctimes
// come from a coarse clock, of 1 to 10 ms, or of a second on a filesystem
// without nanosecond timestamps). So, as git compares an entry's times
// with its index file's, the worker creates a stamp file once the
// checkout is written, before the task starts, and trusts only records
// whose ctime is strictly before the stamp's: a change made by the task
// comes after the stamp was made, so its ctime is at or after the
// stamp's, and cannot equal a trusted record's. Files of the checkout's
// last tick are hashed again. The one assumption is the real-time clock
// not stepping back between the checkout and the task's change, which
// only the host's administrator can do, and which git assumes too.
type statCache struct {
	files map[string]cachedFile
	// stamp is the ctime (ns) of the file made after the checkout; zero
	// when it could not be made: then nothing is trusted.
	stamp int64
}

// cachedFile is one file as the checkout wrote it.
type cachedFile struct {
	stat fileStat
	hash plumbing.Hash
}

// fileStat is the stat data the cache compares (and git's index keeps).
// Valid is false where the platform gives none (the cache then never
// matches).
type fileStat struct {
	Dev, Ino     uint64
	Mode         uint32 // st_mode: type and permissions
	UID, GID     uint32
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
	Valid        bool
}

// fill copies the stat data into an index entry, as git does, so that
// the task's git sees the checkout as clean without hashing it again.
func (st fileStat) fill(e *index.Entry) {
	if !st.Valid {
		return
	}
	e.Size = uint32(st.Size)
	e.ModifiedAt = time.Unix(0, st.Mtime)
	e.CreatedAt = time.Unix(0, st.Ctime)
	e.Dev, e.Inode, e.UID, e.GID = uint32(st.Dev), uint32(st.Ino), st.UID, st.GID
}

func newStatCache(n int) *statCache {
	return &statCache{files: make(map[string]cachedFile, n)}
}

// add records the regular file at name (slash-separated, relative to the
// workspace) as written with blob h.
func (c *statCache) add(name string, st fileStat, h plumbing.Hash) {
	if st.Valid {
		c.files[name] = cachedFile{stat: st, hash: h}
	}
}

// lookup returns the blob of the file at name when its stat data now is
// what the checkout recorded and the record is older than the stamp.
func (c *statCache) lookup(name string, now fileStat) (plumbing.Hash, bool) {
	if c == nil || c.stamp == 0 || !now.Valid {
		return plumbing.ZeroHash, false
	}
	rec, ok := c.files[name]
	if !ok || rec.stat.Ctime >= c.stamp || rec.stat != now {
		return plumbing.ZeroHash, false
	}
	return rec.hash, true
}

// checkoutStamp creates and removes a file in dir and returns its ctime
// (ns), zero when that fails.
func checkoutStamp(dir string) int64 {
	f, err := os.CreateTemp(dir, ".forge-stamp-")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	st := statOf(fi)
	if !st.Valid {
		return 0
	}
	return st.Ctime
}
