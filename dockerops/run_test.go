package dockerops

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// fakeRunner plays the engine's side of an attached run over an in-memory
// connection: once started, it reads stdin to EOF, then runs script.
type fakeRunner struct {
	script    func(stdout, stderr io.Writer, stdin []byte, stopped <-chan struct{})
	exitCode  int64
	attachErr []error

	mu       sync.Mutex
	attaches int
	started  bool
	stops    int
	stopped  chan struct{}
	exited   chan struct{}
	stdin    []byte
	engine   net.Conn
}

func newFakeRunner(script func(stdout, stderr io.Writer, stdin []byte, stopped <-chan struct{})) *fakeRunner {
	return &fakeRunner{script: script, stopped: make(chan struct{}), exited: make(chan struct{})}
}

func (f *fakeRunner) ContainerAttach(_ context.Context, _ string, o container.AttachOptions) (types.HijackedResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attaches++
	if f.attaches <= len(f.attachErr) {
		return types.HijackedResponse{}, f.attachErr[f.attaches-1]
	}
	if !o.Stream || !o.Stdin || !o.Stdout || !o.Stderr {
		panic("attach must stream stdin, stdout and stderr")
	}
	client, engine := net.Pipe()
	f.engine = engine
	return types.NewHijackedResponse(client, ""), nil
}

func (f *fakeRunner) ContainerStart(context.Context, string, container.StartOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.engine == nil {
		panic("started before attaching")
	}
	f.started = true
	engine := f.engine
	go func() {
		defer close(f.exited)
		defer func() { _ = engine.Close() }()
		// net.Pipe has no half-close: the stdin writer's CloseWrite is a
		// no-op, so the fake reads what it expects and no more.
		stdin := make([]byte, 0, 64)
		buf := make([]byte, 64)
		_ = engine.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		for {
			n, err := engine.Read(buf)
			stdin = append(stdin, buf[:n]...)
			if err != nil {
				break
			}
		}
		_ = engine.SetReadDeadline(time.Time{})
		f.mu.Lock()
		f.stdin = stdin
		f.mu.Unlock()
		f.script(stdcopy.NewStdWriter(engine, stdcopy.Stdout), stdcopy.NewStdWriter(engine, stdcopy.Stderr), stdin, f.stopped)
	}()
	return nil
}

func (f *fakeRunner) ContainerWait(ctx context.Context, _ string, _ container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	resC := make(chan container.WaitResponse)
	errC := make(chan error, 1)
	go func() {
		select {
		case <-f.exited:
			resC <- container.WaitResponse{StatusCode: f.exitCode}
		case <-ctx.Done():
			errC <- ctx.Err()
		}
	}()
	return resC, errC
}

func (f *fakeRunner) ContainerStop(context.Context, string, container.StopOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stops == 0 {
		close(f.stopped)
		if f.engine != nil {
			_ = f.engine.Close() // the killed worker's stdio closes
		}
	}
	f.stops++
	return nil
}

func (f *fakeRunner) stopCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stops
}

// runFake runs the fake and checks that no goroutine outlives RunAttached.
func runFake(t *testing.T, ctx context.Context, f *fakeRunner, onLine func([]byte) error, limits RunLimits) (RunResult, error) {
	t.Helper()
	before := runtime.NumGoroutine()
	res, err := newClient(fastOptions(), f).RunAttached(ctx, "ctr", []byte("start-packet"), onLine, limits)
	if f.started {
		select {
		case <-f.exited:
		case <-time.After(5 * time.Second):
			t.Fatal("the fake engine never finished")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines leaked")
	return res, err
}

func TestRunAttachedFakeHappyPath(t *testing.T) {
	f := newFakeRunner(func(stdout, stderr io.Writer, stdin []byte, _ <-chan struct{}) {
		_, _ = io.WriteString(stdout, "hello\nstdin=")
		_, _ = stdout.Write(stdin)
		_, _ = io.WriteString(stdout, "\n")
		_, _ = io.WriteString(stderr, "warning\n")
		_, _ = io.WriteString(stdout, "tail")
	})
	f.exitCode = 4
	var lines []string
	res, err := runFake(t, context.Background(), f, func(l []byte) error { lines = append(lines, string(l)); return nil }, RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, RunResult{ExitCode: 4, Stderr: "warning\n"}, res)
	assert.Equal(t, []string{"hello", "stdin=start-packet", "tail"}, lines)
	assert.Zero(t, f.stopCount())
}

func TestRunAttachedFakeCallbackErrorStops(t *testing.T) {
	f := newFakeRunner(func(stdout, _ io.Writer, _ []byte, stopped <-chan struct{}) {
		_, _ = io.WriteString(stdout, "one\ntwo\n")
		<-stopped
	})
	boom := errors.New("sink failed")
	_, err := runFake(t, context.Background(), f, func(l []byte) error {
		if string(l) == "two" {
			return boom
		}
		return nil
	}, RunLimits{})
	assert.Equal(t, boom, err)
	assert.Equal(t, 1, f.stopCount())
}

func TestRunAttachedFakeOutputLimitStops(t *testing.T) {
	f := newFakeRunner(func(stdout, _ io.Writer, _ []byte, stopped <-chan struct{}) {
		for {
			select {
			case <-stopped:
				return
			default:
			}
			if _, err := io.WriteString(stdout, "0123456789\n"); err != nil {
				<-stopped
				return
			}
		}
	})
	f.exitCode = 143
	res, err := runFake(t, context.Background(), f, nil, RunLimits{MaxStdoutBytes: 1000})
	assert.Equal(t, failure.SandboxLogLimit, failure.CodeOf(err), err)
	assert.True(t, res.OutputTruncated)
	assert.Equal(t, 143, res.ExitCode)
	assert.Equal(t, 1, f.stopCount())
}

func TestRunAttachedFakeCancelStops(t *testing.T) {
	f := newFakeRunner(func(stdout, _ io.Writer, _ []byte, stopped <-chan struct{}) {
		_, _ = io.WriteString(stdout, "working\n")
		<-stopped
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := runFake(t, ctx, f, func([]byte) error { cancel(); return nil }, RunLimits{})
	assert.Equal(t, context.Canceled, err)
	assert.Equal(t, 1, f.stopCount())
}

func TestRunAttachedFakeMaxDuration(t *testing.T) {
	f := newFakeRunner(func(_, _ io.Writer, _ []byte, stopped <-chan struct{}) { <-stopped })
	_, err := runFake(t, context.Background(), f, nil, RunLimits{MaxDuration: 200 * time.Millisecond})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "container run exceeded")
	assert.Equal(t, 1, f.stopCount())
}

func TestRunAttachedFakeAttachRetry(t *testing.T) {
	f := newFakeRunner(func(stdout, _ io.Writer, _ []byte, _ <-chan struct{}) { _, _ = io.WriteString(stdout, "ok\n") })
	f.attachErr = []error{dialRefused}
	_, err := runFake(t, context.Background(), f, nil, RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 2, f.attaches)

	// A 503 during attach is not retried: a half-made attach could hold stdin.
	f = newFakeRunner(nil)
	f.attachErr = []error{cerrdefs.ErrUnavailable}
	_, err = runFake(t, context.Background(), f, nil, RunLimits{})
	assert.Equal(t, failure.SandboxWorkerFailed, failure.CodeOf(err))
	assert.Equal(t, 1, f.attaches)
}
