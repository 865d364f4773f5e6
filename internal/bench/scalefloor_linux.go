package bench

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// mountExt4 mounts the ext4 device on dir with the engine local driver's
// options (only "nodev" and "nosuid" are expected).
func mountExt4(device, dir, options string) error {
	var flags uintptr
	for _, o := range strings.Split(options, ",") {
		switch o {
		case "":
		case "nodev":
			flags |= unix.MS_NODEV
		case "nosuid":
			flags |= unix.MS_NOSUID
		default:
			return fmt.Errorf("mount option %q is not one the floor knows", o)
		}
	}
	return unix.Mount(device, dir, "ext4", flags, "")
}

func unmount(dir string) error { return unix.Unmount(dir, 0) }
