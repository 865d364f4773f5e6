package runner_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/internal/daemon/runner"
)

// TestCloseReportsLateWorkAndReleasesWhenItEnds: a teardown that outlives
// Close's deadline makes Close return a LateWorkError naming it, never
// hang; the context lock stays held until the teardown ends, and is
// released then.
func TestCloseReportsLateWorkAndReleasesWhenItEnds(t *testing.T) {
	const lateEnded = "the late work ended"
	lockRoot := t.TempDir()
	logs := newLogSignal(closeWaiting, lateEnded)
	held := newHeldTeardown(t)
	e := newE2E(t, runner.Config{LockRoot: lockRoot, Logger: slog.New(logs), CloseTimeout: 100 * time.Millisecond,
		WrapDocker: func(d actors.Docker) actors.Docker { held.Docker = d; return held }})
	e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	select {
	case <-held.entered:
	case <-time.After(attemptTimeout):
		t.Fatal("the attempt never reached its teardown")
	}

	err := e.runner.Close()
	var late *runner.LateWorkError
	require.True(t, errors.As(err, &late), "%v", err)
	assert.Contains(t, late.Running, "teardown")
	assert.True(t, contextLockHeld(t, lockRoot, e.engine.DaemonHost()), "the context lock was released under the late teardown")
	assert.Equal(t, err, e.runner.Close(), "a second Close reports the first's result")

	held.let()
	require.NoError(t, <-held.done, "the teardown could not finish on the runner's client")
	select {
	case <-logs.on(lateEnded):
	case <-time.After(time.Minute):
		t.Fatal("the runner never released after the late work ended")
	}
	assert.False(t, contextLockHeld(t, lockRoot, e.engine.DaemonHost()), "the context lock is still held after the late work ended")
}
