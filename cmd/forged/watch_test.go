package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// serveFrames serves /v1/inspect/stream on a unix socket: frame(n) for
// n = 1, 2, … every interval the client asks for, until the test ends.
func serveFrames(t *testing.T, frame func(n int) runner.ConsoleFrame) (socket string, intervals <-chan string) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "forged.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	asked := make(chan string, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/inspect/stream", func(w http.ResponseWriter, r *http.Request) {
		asked <- r.URL.Query().Get("interval")
		w.Header().Set("Content-Type", "text/event-stream")
		for n := 1; ; n++ {
			data, err := json.Marshal(frame(n))
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "event: frame\ndata: %s\n\n", data); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket, asked
}

func consoleFrame(n int) runner.ConsoleFrame {
	return runner.ConsoleFrame{
		At:       time.Date(2030, 1, 1, 12, 0, n, 0, time.UTC),
		Snapshot: &messages.Snapshot{Slots: 2, Attempts: []string{"a1"}, Queued: n},
		Actors: []runner.ActorView{
			{InspectReply: messages.InspectReply{PID: "supervisor", Kind: "supervisor", Phase: "running", Children: []string{"supervisor/attempt-a1"}},
				Stats: &metrics.ActorStats{MessagesIn: uint64(10 * n), MessagesOut: 3}},
			{InspectReply: messages.InspectReply{PID: "supervisor/attempt-a1", Kind: "attempt", Phase: "running",
				Facts: map[string]string{"container": "forge-agent-a1\x1b]0;pwned\x07"}}, Stats: &metrics.ActorStats{MailboxDepth: 1, Restarts: 0}},
		},
		Attempts: []runner.AttemptView{{AttemptSummary: runner.AttemptSummary{AttemptID: "a1", State: "running"},
			Timeline: []metrics.PhaseSpan{{Phase: "preparing", Seconds: 0.5}, {Phase: "running"}}}},
	}
}

// TestInspectWatchRedrawsInPlaceUnderAPseudoTerminal runs the built forged
// with `inspect --watch` on a pty against a socket serving frames: each
// frame is drawn after a cursor-home and clear, the tree carries each
// actor's counters, a hostile fact's control characters come out escaped,
// and SIGINT ends it with status 0.
func TestInspectWatchRedrawsInPlaceUnderAPseudoTerminal(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	socket, intervals := serveFrames(t, consoleFrame)

	cmd := exec.Command(forged, "inspect", "--watch", "--interval", "250ms", "--socket", socket)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	require.NoError(t, err)
	defer tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	read := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	require.Eventually(t, func() bool { return strings.Count(read(), "\x1b[H\x1b[2J") >= 3 }, 20*time.Second, 10*time.Millisecond, "%q", read())
	assert.Equal(t, "250ms", <-intervals)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit status after SIGINT")
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("inspect --watch did not end on SIGINT")
	}

	out := read()
	frames := strings.Split(out, "\x1b[H\x1b[2J")
	last := frames[len(frames)-1]
	assert.Contains(t, last, "supervisor [running] supervisor")
	assert.Regexp(t, `supervisor \[running\] supervisor  \| mailbox=0 in=\d+0 out=3 restarts=0`, last)
	assert.Contains(t, last, "  attempt [running] supervisor/attempt-a1")
	assert.Contains(t, last, "a1  running  preparing 0.5s → running …")
	assert.Regexp(t, `slots 1/2  queued \d+`, last)
	assert.NotContains(t, out, "\x1b]0;pwned", "the fact's escape sequence is not passed to the terminal")
	assert.NotContains(t, out, "\x07")
	// Only the redraw's own sequences reach the terminal.
	assert.Equal(t, strings.Count(out, "\x1b"), 2*strings.Count(out, "\x1b[H\x1b[2J"), "%q", out)
}

// TestInspectWatchWithoutATerminalPrintsFramesOneAfterTheOther checks the
// plain and JSON forms: no control sequence, one frame after another.
func TestInspectWatchWithoutATerminalPrintsFramesOneAfterTheOther(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	socket, _ := serveFrames(t, consoleFrame)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, forged, "inspect", "--watch", "--json", "--socket", socket)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	dec := json.NewDecoder(stdout)
	for i := 1; i <= 2; i++ {
		var frame runner.ConsoleFrame
		require.NoError(t, dec.Decode(&frame))
		assert.Equal(t, "supervisor", frame.Actors[0].PID)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_, _ = io.Copy(io.Discard, stdout)
	require.NoError(t, cmd.Wait())

	out, err := exec.CommandContext(ctx, "timeout", "--preserve-status", "-s", "INT", "1", forged, "inspect", "--watch", "--socket", socket).Output()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "\x1b")
	assert.GreaterOrEqual(t, strings.Count(string(out), "slots 1/2"), 2)
}

// serveMember serves GET /v1/fleet/members/{id}/inspect on a unix socket:
// tree(n) for the n-th reading of member "m1", 404 fleet_member_unknown
// for any other id.
func serveMember(t *testing.T, tree func(n int) ([]messages.InspectReply, bool)) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "forged.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	var mu sync.Mutex
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/fleet/members/{id}/inspect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") != "m1" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"fleet_member_unknown","message":"no member of the fleet has runner id `+r.PathValue("id")+`"}`)
			return
		}
		mu.Lock()
		n++
		replies, ok := tree(n)
		mu.Unlock()
		if !ok {
			// As the daemon answers for a listed member that does not.
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"code":"sandbox_runtime_failed","message":"fleet: the member m1 at 127.0.0.1:7001 did not answer"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(replies)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket
}

// TestInspectWatchOfAnotherMember: `forged inspect --watch --member ID`
// reads the member's tree through the daemon again and again: JSON lines
// of readings with the tree (and, when a later reading fails, its error
// while the watch goes on), plain frames with the tree and no control
// sequence (a hostile fact's escape sequence escaped), and a runner id no
// member has ends it at once with the daemon's code.
func TestInspectWatchOfAnotherMember(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	tree := []messages.InspectReply{
		{PID: "supervisor", Kind: "supervisor", Phase: "running", Children: []string{"supervisor/attempt-a1"}},
		{PID: "supervisor/attempt-a1", Kind: "attempt", Phase: "running", Facts: map[string]string{"container": "forge-agent-a1\x1b]0;pwned\x07"}},
	}
	// Readings 1 and 2 answer, 3 fails, then they answer again.
	socket := serveMember(t, func(n int) ([]messages.InspectReply, bool) { return tree, n != 3 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, forged, "inspect", "--watch", "--json", "--interval", "100ms", "--member", "m1", "--socket", socket)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	dec := json.NewDecoder(stdout)
	type reading struct {
		Member string                  `json:"member"`
		Actors []messages.InspectReply `json:"actors"`
		Error  string                  `json:"error"`
	}
	var got []reading
	for range 4 {
		var r reading
		require.NoError(t, dec.Decode(&r))
		got = append(got, r)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_, _ = io.Copy(io.Discard, stdout)
	require.NoError(t, cmd.Wait(), "exit status after SIGINT")
	for i, r := range got {
		assert.Equal(t, "m1", r.Member)
		if i == 2 {
			assert.Empty(t, r.Actors)
			assert.Contains(t, r.Error, "did not answer")
			continue
		}
		assert.Empty(t, r.Error)
		require.Len(t, r.Actors, 2)
		assert.Equal(t, "supervisor/attempt-a1", r.Actors[1].PID)
	}

	out, err := exec.CommandContext(ctx, "timeout", "--preserve-status", "-s", "INT", "1", forged, "inspect", "--watch", "--interval", "100ms", "--member", "m1", "--socket", socket).Output()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "\x1b")
	assert.NotContains(t, string(out), "\x07")
	assert.GreaterOrEqual(t, strings.Count(string(out), "forged member m1"), 2)
	assert.Contains(t, string(out), "  attempt [running] supervisor/attempt-a1")

	var stderr bytes.Buffer
	unknown := exec.CommandContext(ctx, forged, "inspect", "--watch", "--member", "nobody", "--socket", socket)
	unknown.Stderr = &stderr
	err = unknown.Run()
	require.Error(t, err, "a runner id no member has ends the watch")
	assert.Contains(t, stderr.String(), "fleet_member_unknown")
}
