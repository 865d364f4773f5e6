package quota

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/internal/host/mountinfo"
)

const (
	loopControl   = "/dev/loop-control"
	sysBlock      = "/sys/block"
	deletedSuffix = " (deleted)"
	// attachTries bounds the race with other processes for a free device.
	attachTries = 8
)

// attachLoop attaches the image to a free loop device (LOOP_CTL_GET_FREE,
// then LOOP_CONFIGURE) and returns the device's path. Another process may
// take the free device first (EBUSY): then the next free one is tried.
func attachLoop(image string) (string, error) { return attachLoopFlags(image, 0) }

// attachLoopFlags is attachLoop with loop flags (LO_FLAGS_*) set on the
// device.
func attachLoopFlags(image string, flags uint32) (string, error) {
	ctl, err := os.OpenFile(loopControl, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer ctl.Close()
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer img.Close()
	for range attachTries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		err = configure(dev, img, image, flags)
		if errors.Is(err, unix.EBUSY) {
			continue
		}
		if err != nil {
			return "", err
		}
		return dev, nil
	}
	return "", fmt.Errorf("no free loop device after %d tries", attachTries)
}

// configure binds one loop device to the open image.
func configure(dev string, img *os.File, name string, flags uint32) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	cfg.Info.Flags = flags
	copy(cfg.Info.File_name[:], name)
	err = unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
		// Kernels before 5.8 lack LOOP_CONFIGURE: bind, then name.
		if err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err == nil {
			err = unix.IoctlLoopSetStatus64(int(f.Fd()), &cfg.Info)
		}
	}
	if err != nil {
		return fmt.Errorf("configure %s: %w", dev, err)
	}
	return nil
}

// detachLoop detaches a loop device (LOOP_CLR_FD). A device that is gone
// or unbound is success; one still mounted is told to detach itself at
// its last close (the kernel sets autoclear instead of failing; older
// kernels answer EBUSY, and then autoclear is set explicitly).
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENXIO):
		return nil
	case errors.Is(err, unix.EBUSY):
		info, gerr := unix.IoctlLoopGetStatus64(int(f.Fd()))
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		info.Flags |= unix.LO_FLAGS_AUTOCLEAR
		return unix.IoctlLoopSetStatus64(int(f.Fd()), info)
	}
	return err
}

// loopsBackedBy lists the bound loop devices whose backing file matches.
func loopsBackedBy(match func(backing string) bool) ([]string, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		dev := "/dev/" + e.Name()
		backing, err := backingFile(dev)
		if err != nil || backing == "" {
			continue // unbound
		}
		if match(backing) {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// backingFile is the file a loop device is bound to, as the kernel reports
// it (without the " (deleted)" it appends once the file is unlinked).
func backingFile(dev string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSpace(string(raw)), deletedSuffix), nil
}

// mountedUsage measures the image's filesystem through its mount point
// when the image is attached and mounted in this mount namespace.
func mountedUsage(image string) (Usage, bool) {
	devs, err := loopsBackedBy(func(b string) bool { return b == image })
	if err != nil || len(devs) == 0 {
		return Usage{}, false
	}
	for _, dev := range devs {
		number, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(dev), "dev"))
		if err != nil {
			continue
		}
		for _, mp := range mountPoints(strings.TrimSpace(string(number))) {
			var st unix.Statfs_t
			if unix.Statfs(mp, &st) != nil || st.Type != unix.EXT4_SUPER_MAGIC {
				continue
			}
			// The mount may have gone between the two reads: the device
			// of the mount point must still be this loop device.
			var s unix.Stat_t
			if unix.Stat(mp, &s) != nil || fmt.Sprintf("%d:%d", unix.Major(s.Dev), unix.Minor(s.Dev)) != strings.TrimSpace(string(number)) {
				continue
			}
			bsize := st.Bsize
			return Usage{
				TotalBytes: int64(st.Blocks) * bsize, FreeBytes: int64(st.Bavail) * bsize,
				TotalInodes: int64(st.Files), FreeInodes: int64(st.Ffree), Source: "statfs",
			}, true
		}
	}
	return Usage{}, false
}

// mountPoints lists where the device "major:minor" is mounted, from
// /proc/self/mountinfo.
func mountPoints(number string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[2] == number {
			out = append(out, mountinfo.Unescape(fields[4]))
		}
	}
	return out
}
