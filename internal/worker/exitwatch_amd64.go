//go:build linux

package worker

import "golang.org/x/sys/unix"

const (
	auditArch   = unix.AUDIT_ARCH_X86_64
	exitGroupNr = unix.SYS_EXIT_GROUP
)

// watchedSyscalls are the syscalls the exit watch stops at: those always,
// and those (with the index of their flags argument) only with O_TRUNC.
func watchedSyscalls() (always []uint32, truncArg map[uint32]uint32) {
	return []uint32{unix.SYS_EXIT_GROUP, unix.SYS_UNLINK, unix.SYS_UNLINKAT, unix.SYS_RMDIR,
			unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2, unix.SYS_TRUNCATE, unix.SYS_FTRUNCATE,
			unix.SYS_FALLOCATE, unix.SYS_CREAT, unix.SYS_OPENAT2},
		map[uint32]uint32{unix.SYS_OPEN: 1, unix.SYS_OPENAT: 2}
}
