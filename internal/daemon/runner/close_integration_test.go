package runner_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/host/preflight"
)

// heldTeardown is a Docker whose Teardown waits, once entered, until the
// test releases it; then it tears down on the runner's client and reports
// how that went.
type heldTeardown struct {
	actors.Docker
	entered     chan struct{}
	enterOnce   sync.Once
	release     chan struct{}
	releaseOnce sync.Once
	done        chan error
}

func newHeldTeardown(t *testing.T) *heldTeardown {
	h := &heldTeardown{entered: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(h.let) // a failed test still lets the teardown finish
	return h
}

func (h *heldTeardown) let() { h.releaseOnce.Do(func() { close(h.release) }) }

func (h *heldTeardown) Teardown(ctx context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error) {
	h.enterOnce.Do(func() { close(h.entered) })
	<-h.release
	report, err := h.Docker.Teardown(ctx, owner, source)
	select {
	case h.done <- err:
	default:
	}
	return report, err
}

// logSignal closes a channel the first time the runner logs a message
// containing its text. The channel stays in place once closed, so a test
// that asks for it after the message was logged still sees it closed.
type logSignal struct {
	slog.Handler
	mu      sync.Mutex
	signals map[string]chan struct{}
	fired   map[string]bool
}

func newLogSignal(texts ...string) *logSignal {
	l := &logSignal{Handler: slog.DiscardHandler, signals: map[string]chan struct{}{}, fired: map[string]bool{}}
	for _, text := range texts {
		l.signals[text] = make(chan struct{})
	}
	return l
}

func (l *logSignal) Enabled(context.Context, slog.Level) bool { return true }

func (l *logSignal) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for text, ch := range l.signals {
		if !l.fired[text] && strings.Contains(r.Message, text) {
			close(ch)
			l.fired[text] = true
		}
	}
	return nil
}

func (l *logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSignal) WithGroup(string) slog.Handler      { return l }

// on returns the channel closed when text is logged.
func (l *logSignal) on(text string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signals[text]
}

const closeWaiting = "waiting for the stopped tree's work"

// contextLockHeld reports whether the Docker context lock under lockRoot
// is held (by the runner: the test process holds no other).
func contextLockHeld(t *testing.T, lockRoot, host string) bool {
	t.Helper()
	lock, err := preflight.AcquireContextLock(lockRoot, host)
	if err != nil {
		require.Equal(t, preflight.DockerContextOwned, failure.CodeOf(err), "%v", err)
		return true
	}
	require.NoError(t, lock.Release())
	return false
}

// TestCloseWaitsForTheTeardownInFlight: Close while an attempt's teardown
// is still running stops the tree, and waits for the teardown before it
// closes the Docker clients and releases the context lock (Close used to
// return at once, closing both under the teardown).
func TestCloseWaitsForTheTeardownInFlight(t *testing.T) {
	lockRoot := t.TempDir()
	logs := newLogSignal(closeWaiting)
	held := newHeldTeardown(t)
	e := newE2E(t, runner.Config{LockRoot: lockRoot, Logger: slog.New(logs),
		WrapDocker: func(d actors.Docker) actors.Docker { held.Docker = d; return held }})
	e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	select {
	case <-held.entered:
	case <-time.After(attemptTimeout):
		t.Fatal("the attempt never reached its teardown")
	}

	closed := make(chan error, 1)
	go func() { closed <- e.runner.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the attempt's teardown was still running", err)
	case <-logs.on(closeWaiting):
	}
	assert.True(t, contextLockHeld(t, lockRoot, e.engine.DaemonHost()), "the context lock was released under the teardown")

	held.let()
	require.NoError(t, <-held.done, "the teardown could not finish on the runner's client")
	require.NoError(t, <-closed)
	assert.False(t, contextLockHeld(t, lockRoot, e.engine.DaemonHost()), "Close returned with the context lock held")
}
