package quota

import (
	"os"

	"golang.org/x/sys/unix"
)

// Detect finds the best mechanism this host offers to bound volumes for
// an engine that runs rootless or not: filesystem images need forged to
// run as root beside a rootful engine (which mounts the devices), a loop
// control device, and e2fsprogs' mkfs.ext4 and debugfs.
func Detect(engineRootless bool) Facts {
	switch {
	case engineRootless:
		return Facts{Mechanism: MechanismNone, Reason: "a rootless engine cannot mount filesystem images"}
	case os.Geteuid() != 0:
		return Facts{Mechanism: MechanismNone, Reason: "forged does not run as root, so it cannot attach loop devices"}
	}
	if err := unix.Access(loopControl, unix.R_OK|unix.W_OK); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: loopControl + ": " + err.Error()}
	}
	if _, err := findMkfs(); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: err.Error()}
	}
	if _, err := findDebugfs(); err != nil {
		return Facts{Mechanism: MechanismNone, Reason: err.Error()}
	}
	return Facts{Mechanism: MechanismImage}
}
