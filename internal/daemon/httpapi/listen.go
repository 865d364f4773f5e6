package httpapi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// PeerCred is the kernel's account of the process at the other end of a
// connection (SO_PEERCRED): who connected, not who it claims to be.
type PeerCred struct {
	PID      int32
	UID, GID uint32
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// AllowedUIDs may connect besides root and this process's own uid,
	// which always may.
	AllowedUIDs []uint32
	// OnRefused, when set, is told of every refused connection: a peer
	// whose uid is not allowed, or whose credentials could not be read.
	OnRefused func(cred PeerCred, err error)
}

// Listen opens the daemon's unix socket at path.
//
// The socket never exists with a looser mode than 0600: it is created in a
// fresh 0700 directory beside path (nobody else can reach it there), given
// mode 0600, and only then renamed into place, replacing a stale socket
// file. Nothing but a socket is ever replaced.
//
// Every accepted connection is checked against the kernel's peer
// credentials (SO_PEERCRED): only root, this process's uid and
// opts.AllowedUIDs are served; any other peer is closed before a byte is
// read. Closing the listener removes the socket file.
func Listen(path string, opts ListenOptions) (net.Listener, error) {
	path = filepath.Clean(path)
	if info, err := os.Lstat(path); err == nil && info.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("listen: %s exists and is not a socket", path)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".forged-sock-")
	if err != nil {
		return nil, fmt.Errorf("listen: private directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("listen: private directory: %w", err)
	}
	private := filepath.Join(dir, "s")
	l, err := net.Listen("unix", private)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // the file moves; Close removes it at path
	fail := func(err error) (net.Listener, error) {
		_ = ul.Close()
		return nil, err
	}
	if err := os.Chmod(private, 0o600); err != nil {
		return fail(fmt.Errorf("listen: chmod socket: %w", err))
	}
	// Only a socket is replaced: something else appearing meanwhile stays.
	if info, err := os.Lstat(path); err == nil && info.Mode()&os.ModeSocket == 0 {
		return fail(fmt.Errorf("listen: %s exists and is not a socket", path))
	}
	if err := os.Rename(private, path); err != nil {
		return fail(fmt.Errorf("listen: move socket into place: %w", err))
	}
	allowed := []uint32{0, uint32(os.Getuid())}
	for _, uid := range opts.AllowedUIDs {
		if !slices.Contains(allowed, uid) {
			allowed = append(allowed, uid)
		}
	}
	return &peerListener{UnixListener: ul, path: path, allowed: allowed, onRefused: opts.OnRefused}, nil
}

// peerListener serves only the allowed peers.
type peerListener struct {
	*net.UnixListener
	path      string
	allowed   []uint32
	onRefused func(PeerCred, error)
	closeOnce sync.Once
	closeErr  error
}

// Accept returns the next connection of an allowed peer; others are
// closed unread.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		cred, err := peerCred(conn)
		if err == nil && !slices.Contains(l.allowed, cred.UID) {
			err = fmt.Errorf("peer uid %d (pid %d) is not allowed", cred.UID, cred.PID)
		}
		if err != nil {
			_ = conn.Close()
			if l.onRefused != nil {
				l.onRefused(cred, err)
			}
			continue
		}
		return conn, nil
	}
}

// Close stops listening and removes the socket file.
func (l *peerListener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.UnixListener.Close()
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) && l.closeErr == nil {
			l.closeErr = err
		}
	})
	return l.closeErr
}
