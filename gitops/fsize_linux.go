package gitops

import "golang.org/x/sys/unix"

// limitFileSize sets RLIMIT_FSIZE (soft and hard) of the running process
// pid to max bytes: a write past it fails (SIGXFSZ kills the writer), and
// the processes pid starts from now on inherit the limit.
func limitFileSize(pid int, max int64) error {
	lim := unix.Rlimit{Cur: uint64(max), Max: uint64(max)}
	return unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil)
}
