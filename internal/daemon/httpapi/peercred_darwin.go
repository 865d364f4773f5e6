package httpapi

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads the connecting process's credentials (LOCAL_PEERCRED and
// LOCAL_PEERPID).
func peerCred(conn *net.UnixConn) (PeerCred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Xucred
	var pid int
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if credErr == nil {
			pid, credErr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	c := PeerCred{PID: int32(pid), UID: cred.Uid}
	if cred.Ngroups > 0 {
		c.GID = cred.Groups[0]
	}
	return c, nil
}
