package dockerops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/ids"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
)

// fakeExec plays the engine's side of an exec over a real socket pair
// (so that the client's half-close reaches it): once attached, it reads
// stdin to EOF, then runs script and closes the stream. Inspections
// report the exec running until runningPolls of them have been answered
// after the stream closed.
type fakeExec struct {
	inspectAPI // unused; lets newClient keep the fake

	script       func(stdout, stderr io.Writer)
	exitCode     int
	runningPolls int
	createErrs   []error

	mu        sync.Mutex
	creates   int
	options   container.ExecOptions
	attached  bool
	stdin     []byte
	sawEOF    bool
	streamEnd bool
	inspects  int
	done      chan struct{}
}

func newFakeExec(script func(stdout, stderr io.Writer)) *fakeExec {
	return &fakeExec{script: script, done: make(chan struct{})}
}

func (f *fakeExec) ContainerExecCreate(_ context.Context, _ string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if f.creates <= len(f.createErrs) {
		return container.ExecCreateResponse{}, f.createErrs[f.creates-1]
	}
	f.options = o
	return container.ExecCreateResponse{ID: "exec-1"}, nil
}

func (f *fakeExec) ContainerExecAttach(_ context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	if id != "exec-1" || o.Tty || o.Detach {
		panic("attach to an unknown exec, with a TTY or detached")
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return types.HijackedResponse{}, err
	}
	client, err := fileConn(fds[0])
	if err != nil {
		return types.HijackedResponse{}, err
	}
	engine, err := fileConn(fds[1])
	if err != nil {
		return types.HijackedResponse{}, err
	}
	f.mu.Lock()
	f.attached = true
	f.mu.Unlock()
	go func() {
		defer close(f.done)
		defer func() { _ = engine.Close() }()
		stdin, err := io.ReadAll(io.LimitReader(engine, 1<<20))
		f.mu.Lock()
		f.stdin, f.sawEOF = stdin, err == nil
		f.mu.Unlock()
		f.script(stdcopy.NewStdWriter(engine, stdcopy.Stdout), stdcopy.NewStdWriter(engine, stdcopy.Stderr))
		f.mu.Lock()
		f.streamEnd = true
		f.mu.Unlock()
	}()
	return types.NewHijackedResponse(client, ""), nil
}

func fileConn(fd int) (net.Conn, error) {
	file := os.NewFile(uintptr(fd), "socketpair")
	defer file.Close()
	return net.FileConn(file)
}

func (f *fakeExec) ContainerExecInspect(_ context.Context, id string) (container.ExecInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inspects++
	running := !f.streamEnd || f.runningPolls > 0
	if f.streamEnd && f.runningPolls > 0 {
		f.runningPolls--
	}
	return container.ExecInspect{ExecID: id, Running: running, ExitCode: f.exitCode}, nil
}

// execFake runs fn against a client around f and checks that no
// goroutine outlives it.
func execFake(t *testing.T, f *fakeExec, fn func(c *Client) error) error {
	t.Helper()
	before := runtime.NumGoroutine()
	err := fn(newClient(fastOptions(), f))
	f.mu.Lock()
	attached := f.attached
	f.mu.Unlock()
	if attached {
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
			t.Fatal("the fake engine never finished")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines leaked")
	return err
}

func testUpdate(t *testing.T) []byte {
	t.Helper()
	key, err := lease.NewControlKey()
	require.NoError(t, err)
	u, err := lease.Sign(ids.NewUUID(), ids.NewUUID(), time.Now().Add(time.Hour), key)
	require.NoError(t, err)
	raw, err := json.Marshal(u)
	require.NoError(t, err)
	return raw
}

func TestWriteLeaseUpdate(t *testing.T) {
	update := testUpdate(t)
	f := newFakeExec(func(io.Writer, io.Writer) {})
	f.runningPolls = 3 // the engine records the exit a moment late
	err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(context.Background(), "ctr", update) })
	require.NoError(t, err)

	assert.Equal(t, container.ExecOptions{ // no User: the container's own, the attempt's
		Cmd:          []string{"/opt/forge/forged", "worker", "lease-update"},
		WorkingDir:   "/",
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	}, f.options)
	assert.Equal(t, update, f.stdin, "the exact bytes")
	assert.True(t, f.sawEOF, "stdin closed")
	assert.GreaterOrEqual(t, f.inspects, 4, "inspected until the engine reported the exit")
	assert.Equal(t, 1, f.creates)
}

func TestWriteLeaseUpdateNonZeroExit(t *testing.T) {
	f := newFakeExec(func(_, stderr io.Writer) {
		_, _ = io.WriteString(stderr, "lease-update: applet not found\n")
	})
	f.exitCode = 127
	err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(context.Background(), "ctr", testUpdate(t)) })
	require.Error(t, err)
	assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "exit status 127: lease-update: applet not found")
}

func TestWriteLeaseUpdateBoundsOutput(t *testing.T) {
	f := newFakeExec(func(stdout, stderr io.Writer) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 32 { // 1 MiB
			_, _ = stderr.Write(chunk)
		}
		_, _ = io.WriteString(stdout, "tail")
	})
	f.exitCode = 1
	err := execFake(t, f, func(c *Client) error {
		return c.writeViaExec(context.Background(), "ctr", []string{"x"}, []byte("data"))
	})
	require.Error(t, err)
	assert.Less(t, len(err.Error()), execOutputKeep+512)
	assert.True(t, strings.HasSuffix(err.Error(), "..."), "truncation is marked")
}

// The kept head of an exec's output ends on a whole rune, marked when
// output was dropped.
func TestHeadWriterKeepsWholeRunes(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{[]string{"abc"}, "abc"},
		{[]string{"abcd"}, "abcd"},
		{[]string{"ab", "cde"}, "abcd..."},
		{[]string{"abc€"}, "abc..."},
		{[]string{"abc", "\xe2", "\x82\xac"}, "abc..."},
		{[]string{"a€"}, "a€"},
	} {
		w := &headWriter{keep: 4}
		for _, p := range tc.writes {
			n, err := w.Write([]byte(p))
			require.NoError(t, err)
			require.Equal(t, len(p), n)
		}
		assert.Equal(t, tc.want, w.String(), "%q", tc.writes)
		assert.True(t, utf8.ValidString(w.String()))
	}
}

func TestWriteLeaseUpdateRefusesInvalidUpdate(t *testing.T) {
	f := newFakeExec(nil)
	for _, bad := range [][]byte{nil, []byte("{}"), []byte(`{"leaseControlKey":"k","leaseExpiresAt":"2030-01-01T00:00:00Z"}`)} {
		err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(context.Background(), "ctr", bad) })
		assert.Equal(t, lease.UpdateInvalid, failure.CodeOf(err), "%v", err)
	}
	assert.Zero(t, f.creates, "the engine is not called")
}

func TestWriteLeaseUpdateCreateFailures(t *testing.T) {
	t.Run("not running is permanent", func(t *testing.T) {
		f := newFakeExec(nil)
		notRunning := fmt.Errorf("container ctr is not running: %w", cerrdefs.ErrConflict)
		f.createErrs = []error{notRunning, notRunning}
		err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(context.Background(), "ctr", testUpdate(t)) })
		require.Error(t, err)
		assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(err))
		assert.True(t, cerrdefs.IsConflict(err), "the engine error stays reachable")
		assert.Equal(t, 1, f.creates)
	})
	t.Run("unreachable engine is retried", func(t *testing.T) {
		f := newFakeExec(func(io.Writer, io.Writer) {})
		f.createErrs = []error{dialRefused, dialRefused}
		err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(context.Background(), "ctr", testUpdate(t)) })
		require.NoError(t, err)
		assert.Equal(t, 3, f.creates)
	})
}

func TestWriteLeaseUpdateDeadline(t *testing.T) {
	t.Run("command never finishes its output", func(t *testing.T) {
		release := make(chan struct{})
		f := newFakeExec(func(_, stderr io.Writer) {
			<-release
		})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		begin := time.Now()
		err := execFake(t, f, func(c *Client) error {
			defer close(release)
			return c.WriteLeaseUpdate(ctx, "ctr", testUpdate(t))
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(begin), 5*time.Second)
		assert.Empty(t, failure.CodeOf(err), "the caller's deadline is not a sandbox failure")
	})
	t.Run("engine never reports the exit", func(t *testing.T) {
		f := newFakeExec(func(io.Writer, io.Writer) {})
		f.runningPolls = 1 << 30
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := execFake(t, f, func(c *Client) error { return c.WriteLeaseUpdate(ctx, "ctr", testUpdate(t)) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "still running")
		assert.Greater(t, f.inspects, 3, "polled")
		assert.Less(t, f.inspects, 100, "with a growing interval")
	})
}

func TestExecerWithoutEngine(t *testing.T) {
	err := newClient(fastOptions(), nil).WriteLeaseUpdate(context.Background(), "ctr", testUpdate(t))
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}
