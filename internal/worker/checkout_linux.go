package worker

import (
	"io"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// createFile creates the file full exclusively, never through a link
// (O_EXCL, O_NOFOLLOW), writes data or, when r is not nil, r's content,
// and returns the file's stat data as written. It goes to the system calls
// directly: os.OpenFile adds four fcntl calls and a failed poller
// registration per file, a third of a checkout's system time.
func createFile(full string, perm uint32, data []byte, r io.Reader) (fileStat, error) {
	fd, err := openRetry(full, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return fileStat{}, &fs.PathError{Op: "create", Path: full, Err: err}
	}
	st, err := writeAndStat(fd, data, r)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fileStat{}, &fs.PathError{Op: "write", Path: full, Err: err}
	}
	return st, nil
}

func openRetry(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// writeAndStat writes data (or r's content) to fd and fstats it.
func writeAndStat(fd int, data []byte, r io.Reader) (fileStat, error) {
	if r != nil {
		buf := make([]byte, 64<<10)
		for {
			n, rerr := r.Read(buf)
			if err := writeAll(fd, buf[:n]); err != nil {
				return fileStat{}, err
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return fileStat{}, rerr
			}
		}
	} else if err := writeAll(fd, data); err != nil {
		return fileStat{}, err
	}
	var st unix.Stat_t
	for {
		err := unix.Fstat(fd, &st)
		if err == nil {
			return statFromUnix(&st), nil
		}
		if err != unix.EINTR {
			return fileStat{}, err
		}
	}
}

func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// lstatFile returns the stat data of full itself (a link is not
// followed).
func lstatFile(full string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return fileStat{}, &fs.PathError{Op: "lstat", Path: full, Err: err}
	}
	return statFromUnix(&st), nil
}

func statFromUnix(st *unix.Stat_t) fileStat {
	return fileStat{
		Dev: uint64(st.Dev), Ino: st.Ino, Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Valid: true,
	}
}

// statOf is the stat data of a FileInfo from lstat (os.DirEntry.Info).
func statOf(fi fs.FileInfo) fileStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}
	}
	return fileStat{
		Dev: uint64(st.Dev), Ino: st.Ino, Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Valid: true,
	}
}
