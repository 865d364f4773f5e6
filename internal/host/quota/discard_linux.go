package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ext4's shutdown ioctl (EXT4_IOC_SHUTDOWN, _IOR('X', 125, __u32)) and its
// flag that drops what is not yet written (EXT4_GOING_FLAGS_NOLOGFLUSH).
const (
	ext4IocShutdown     = 0x8004587d
	ext4GoingNoLogFlush = 0x2
	discardOpenFlags    = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
)

// discard measures the image's mounted filesystem and shuts it down
// without writing back its dirty pages (see Store.Discard). It returns a
// descriptor of the filesystem's root, held open (-1 when it failed).
func discard(image string) (Usage, int, error) {
	devs, err := loopsBackedBy(func(b string) bool { return b == image })
	if err != nil {
		return Usage{}, -1, err
	}
	for _, dev := range devs {
		number, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(dev), "dev"))
		if err != nil {
			continue
		}
		want := strings.TrimSpace(string(number))
		for _, mp := range mountPoints(want) {
			u, fd, err := shutdownAt(mp, want)
			if errors.Is(err, errDiscardNotMounted) {
				continue // unmounted in between: the next one
			}
			return u, fd, err
		}
	}
	return Usage{}, -1, errDiscardNotMounted
}

// shutdownAt opens the mount point, checks that it is still the root of
// an ext4 filesystem on the device "major:minor", reads its usage and
// shuts the filesystem down. On success the descriptor stays open.
func shutdownAt(mountPoint, number string) (_ Usage, _ int, err error) {
	fd, err := unix.Open(mountPoint, discardOpenFlags, 0)
	if err != nil {
		return Usage{}, -1, errDiscardNotMounted
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.EXT4_SUPER_MAGIC ||
		fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)) != number {
		return Usage{}, -1, errDiscardNotMounted
	}
	u := Usage{
		TotalBytes: int64(fs.Blocks) * fs.Bsize, FreeBytes: int64(fs.Bavail) * fs.Bsize,
		TotalInodes: int64(fs.Files), FreeInodes: int64(fs.Ffree), Source: "statfs",
	}
	flag := uint32(ext4GoingNoLogFlush)
	if err := unix.IoctlSetPointerInt(fd, ext4IocShutdown, int(flag)); err != nil {
		return u, -1, fmt.Errorf("shut down %s: %w", mountPoint, err)
	}
	return u, fd, nil
}

func closeHeld(fd int) error { return unix.Close(fd) }
