//go:build !linux && !darwin

package httpapi

import (
	"errors"
	"net"
)

// peerCred is unsupported here: every peer is refused (fail closed).
func peerCred(*net.UnixConn) (PeerCred, error) {
	return PeerCred{}, errors.New("peer credentials are only checked on Linux; refusing the connection")
}
