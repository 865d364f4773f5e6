package preflight

import (
	"errors"

	"golang.org/x/sys/unix"
)

// canPtraceOthers reports whether this process has CAP_SYS_PTRACE in its
// effective set, which /proc/<pid>/root of another user's process needs.
func canPtraceOthers() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[unix.CAP_SYS_PTRACE/32].Effective&(1<<(unix.CAP_SYS_PTRACE%32)) == 0 {
		return errors.New("needs CAP_SYS_PTRACE (root)")
	}
	return nil
}
