package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The socket's name only ever appears by a rename of a socket that already
// has its final mode: inotify sees IN_MOVED_TO for it, never IN_CREATE
// (which a bind at the final path followed by chmod would produce).
func TestListenCreatesTheSocketWithItsFinalMode(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ATTRIB)
	require.NoError(t, err)

	path := filepath.Join(dir, "forged.sock")
	l, err := Listen(path, ListenOptions{})
	require.NoError(t, err)
	info, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket|0o600, info.Mode())

	events := map[string][]uint32{}
	buf := make([]byte, 64<<10)
	n, err := unix.Read(fd, buf)
	require.NoError(t, err)
	for off := 0; off < n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
		events[name] = append(events[name], ev.Mask)
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	require.Contains(t, events, "forged.sock", "%v", events)
	for _, mask := range events["forged.sock"] {
		assert.Zero(t, mask&(unix.IN_CREATE|unix.IN_ATTRIB), "the socket was created or chmodded at its final path (mask %#x)", mask)
	}
	assert.NotZero(t, events["forged.sock"][0]&unix.IN_MOVED_TO)

	// Nothing but the socket is left beside it, and Close removes it.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.NoError(t, l.Close())
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestListenReplacesOnlyASocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "forged.sock")
	stale, err := net.Listen("unix", path)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())
	l, err := Listen(path, ListenOptions{})
	require.NoError(t, err, "a stale socket is replaced")
	require.NoError(t, l.Close())

	require.NoError(t, os.WriteFile(path, []byte("not a socket"), 0o600))
	_, err = Listen(path, ListenOptions{})
	assert.ErrorContains(t, err, "is not a socket")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "not a socket", string(data))
}

// peerHelperEnv names the socket the helper process connects to.
const peerHelperEnv = "FORGED_PEER_HELPER_SOCKET"

// TestPeerHelperProcess is not a test: run with peerHelperEnv set (by
// TestPeerCredentialsAreChecked, under another uid), it asks the socket for
// /probe and prints the status or the error.
func TestPeerHelperProcess(t *testing.T) {
	socket := os.Getenv(peerHelperEnv)
	if socket == "" {
		return
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	res, err := client.Get("http://forged/probe")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(0)
	}
	body, _ := io.ReadAll(res.Body)
	fmt.Printf("status %d %s\n", res.StatusCode, body)
	os.Exit(0)
}

// A process of another uid is refused, even one that can open the socket
// file (here: mode widened on purpose, so that only the credentials check
// stands between it and the API); root and the allowed uids are served.
func TestPeerCredentialsAreChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root to start processes under other uids")
		}
		t.Skip("needs root to start processes under other uids")
	}
	// The helper binary and the socket live where every uid can reach them.
	dir, err := os.MkdirTemp("", "forged-peercred-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	helper := filepath.Join(dir, "helper")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(helper, data, 0o755))

	socket := filepath.Join(dir, "forged.sock")
	var mu sync.Mutex
	var refused []PeerCred
	l, err := Listen(socket, ListenOptions{AllowedUIDs: []uint32{4242}, OnRefused: func(c PeerCred, _ error) {
		mu.Lock()
		refused = append(refused, c)
		mu.Unlock()
	}})
	require.NoError(t, err)
	require.NoError(t, os.Chmod(socket, 0o666)) // only the credentials check remains
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	runAs := func(uid uint32) string {
		cmd := exec.Command(helper, "-test.run=^TestPeerHelperProcess$")
		cmd.Env = append(os.Environ(), peerHelperEnv+"="+socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	assert.Equal(t, "status 200 served", runAs(0), "root is served")
	assert.Equal(t, "status 200 served", runAs(4242), "an allowed uid is served")
	out := runAs(65534)
	assert.True(t, strings.HasPrefix(out, "error:"), "another uid is refused: %s", out)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, refused) // the client may retry a GET once on a closed connection
	for _, c := range refused {
		assert.Equal(t, uint32(65534), c.UID)
		assert.Positive(t, c.PID)
	}
}
