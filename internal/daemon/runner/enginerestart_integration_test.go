package runner_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/privdockerd"
	"github.com/forgedev/forged/messages"
)

// privateEngine starts a dockerd of the test's own with the example's
// base image copied in from the shared engine, and points this process's
// Docker clients (the runner's and enginetest's) at it. The shared engine
// is never restarted.
func privateEngine(t *testing.T, opts privdockerd.Options) *privdockerd.Daemon {
	t.Helper()
	shared := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	_ = docker.Close()
	require.NoError(t, err)
	d := privdockerd.Start(t, opts)
	d.LoadImages(shared, example.BaseImage)
	t.Setenv("DOCKER_CONTEXT", "")
	t.Setenv("DOCKER_HOST", d.Host())
	return d
}

// reaperRounds is how many rounds the runner's reaper has finished.
func reaperRounds(t *testing.T, r *runner.Runner) int {
	t.Helper()
	for _, reply := range r.Inspect() {
		if reply.Kind == "reaper" {
			n, err := strconv.Atoi(reply.Facts["rounds"])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no reaper in the actor tree")
	return 0
}

// TestEndToEndEngineRestartMidRunIsReapedWhenTheEngineAnswers stops the
// (private) engine (SIGTERM) while the task runs and starts it again once
// the attempt has ended: the attempt ends with a code and a message that
// name the engine, its teardown says that objects remain (it counts them
// while dockerd shuts down, or cannot even list them once it is gone),
// and the reaper removes them as soon as the engine answers again, long
// before its next scheduled round (an hour away).
func TestEndToEndEngineRestartMidRunIsReapedWhenTheEngineAnswers(t *testing.T) {
	engine := privateEngine(t, privdockerd.Options{})
	e := newE2E(t, runner.Config{ReapInterval: time.Hour})
	d := e.dispatch([]string{"/bin/sh", "-c", "echo started; sleep 300"}, 0)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")

	engine.Stop()
	out := e.wait(log)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxRuntimeFailed), out.Code)
	assert.Contains(t, out.Message, "Docker engine", "the message names the engine")
	require.NotNil(t, out.Cleanup)
	// The engine is down: the teardown cannot list what remains, and
	// says so (with the engine still shutting down it counts them).
	assert.True(t, out.Cleanup.Remaining > 0 || out.Cleanup.RemainingUnknown, "the report says objects remain: %+v", *out.Cleanup)
	assert.True(t, out.Degraded)
	snap, err := e.runner.Snapshot()
	require.NoError(t, err)
	require.Equal(t, 1, snap.Degraded)

	engine.Again()
	back := time.Now()
	deadline := back.Add(time.Minute)
	for {
		snap, err := e.runner.Snapshot()
		require.NoError(t, err)
		left := enginetest.Labelled(t, e.engine, dockerops.LabelManaged)
		if snap.Degraded == 0 && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the engine answered again: degraded %d, left %v, reaper rounds %d",
				snap.Degraded, left, reaperRounds(t, e.runner))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("outcome %s: %s; %d objects left; reaped %s after the engine answered (%d reaper rounds)",
		out.Code, out.Message, out.Cleanup.Remaining, time.Since(back).Round(time.Millisecond), reaperRounds(t, e.runner))
}

// TestEndToEndLiveRestoreReattachesTheWorkerAcrossAnEngineRestart
// restarts a live-restore engine while the task runs: the worker keeps
// running, forged re-attaches to it once the engine answers again, and
// the attempt finishes as it would have without the restart.
func TestEndToEndLiveRestoreReattachesTheWorkerAcrossAnEngineRestart(t *testing.T) {
	engine := privateEngine(t, privdockerd.Options{LiveRestore: true})
	e := newE2E(t, runner.Config{ReapInterval: time.Hour})
	d := e.dispatch([]string{"/bin/sh", "-c", "echo started; sleep 8; echo 'hello from the sandbox' > hello.txt; echo done"}, 0)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")

	engine.Restart()
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	counts := map[string]int{}
	for _, ev := range log.Events() {
		counts[ev.EventType+": "+ev.Content]++
	}
	assert.Equal(t, 1, counts["task_output: started"], "an event delivered before the restart is not delivered again")
	assert.Equal(t, 1, counts["task_output: done"], "the event the task wrote after the restart arrives once")
	reattached := waitForEvent(t, log, "sandbox_reattached")
	t.Logf("%s", reattached.Content)
	assert.Equal(t, "hello from the sandbox", e.git("show", example.Branch+":hello.txt"))
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
	assert.Empty(t, enginetest.Labelled(t, e.engine, dockerops.LabelManaged), "nothing forged-labelled remains on the engine")
}
