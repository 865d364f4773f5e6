package quota

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Detect finds the best mechanism this host offers to bound volumes for
// an engine that runs rootless or not. Filesystem images need a rootful
// engine (which mounts the devices), e2fsprogs' mkfs.ext4 and debugfs, and
// a process that may attach loop devices: Detect tries it (attach and
// detach a scratch image) rather than assume who may. The kernel asks for
// no capability there, only read-write access to /dev/loop-control and
// /dev/loopN, which root has and, on Debian, the disk group has (udev makes
// them root:disk 0660).
func Detect(engineRootless bool) Facts {
	if engineRootless {
		return Facts{Mechanism: MechanismNone, Reason: "a rootless engine cannot mount filesystem images"}
	}
	if _, err := findMkfs(); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: err.Error()}
	}
	if _, err := findDebugfs(); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: err.Error()}
	}
	if err := probeLoop(); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: loopDeniedReason(err)}
	}
	return Facts{Mechanism: MechanismImage}
}

// probeLoop attaches a 1 MiB scratch file (unlinked at once) to a free
// loop device the way Provision does, and detaches it again. The device is
// bound with autoclear, so the kernel releases it at its last close even
// if this process dies in between.
func probeLoop() error {
	f, err := os.CreateTemp("", ".forged-loop-probe-")
	if err != nil {
		return fmt.Errorf("scratch image: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	err = f.Truncate(1 << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("scratch image: %w", err)
	}
	dev, err := attachLoopFlags(path, unix.LO_FLAGS_AUTOCLEAR)
	if err != nil {
		return err
	}
	return detachLoop(dev)
}

// loopDeniedReason says why loop devices cannot be used, and what the
// operator can do about a permission error.
func loopDeniedReason(err error) string {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return fmt.Sprintf("forged (uid %d) may not attach loop devices: %v; run forged as root, or give its user the disk group "+
			"(root-equivalent, like docker) with /dev/loop-control and /dev/loop* read-write for that group", os.Geteuid(), err)
	}
	return "loop devices: " + err.Error()
}
