package httpapi

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads the connecting process's credentials (SO_PEERCRED).
func peerCred(conn *net.UnixConn) (PeerCred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return PeerCred{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	return PeerCred{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
