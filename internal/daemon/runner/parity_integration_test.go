package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// These real-engine tests hold the operator-facing behaviours of the seed:
// time limits, output kept on a trusted failure, admission by what a
// dispatch asks for, and the sandbox_metadata event.

// TestEndToEndIdleLimitStopsASilentTask runs under runc and gVisor: the
// host's idle limit releases the worker by signal, and the worker stops
// its task and commits what it wrote, either way.
func TestEndToEndIdleLimitStopsASilentTask(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { idleLimit(t, iso.floor) })
	}
}

func idleLimit(t *testing.T, floor string) {
	// The idle limit is the operator's minimum, 60 s.
	e := newE2E(t, runner.Config{Isolation: floor, Limits: timelimit.Limits{HardWall: 10 * time.Minute, Idle: timelimit.MinIdle}})
	d := e.dispatch([]string{"/bin/sh", "-c", "echo starting; echo before the silence > kept.txt; sleep 600"}, 0)
	started := time.Now()
	log := e.submit(d)
	out := e.wait(log)
	elapsed := time.Since(started)
	require.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxIdleTimeout), out.Code, "%s; events %v", out.Message, eventSummary(log))
	assert.Greater(t, elapsed, timelimit.MinIdle, "not before the idle limit")
	assert.Less(t, elapsed, 3*time.Minute, "long before the 600 s sleep or the hard wall")
	var limit bool
	for _, ev := range log.Events() {
		limit = limit || ev.EventType == string(failure.SandboxIdleTimeout)
	}
	assert.True(t, limit, "the host announced the idle limit")
	// The worker stopped its task within the grace: what it wrote is kept.
	assert.Equal(t, "before the silence", e.git("show", example.Branch+":kept.txt"))
	assert.Equal(t, out.ResultCommitSHA, e.git("rev-parse", "refs/heads/"+example.Branch))
}

func TestEndToEndOOMKeepsTheValidOutput(t *testing.T) {
	e := newE2E(t, runner.Config{})
	// The file is written, then the shell holds ~300 MB: far past 96 MiB.
	d := e.dispatch([]string{"/bin/sh", "-c", "echo written before the oom > kept.txt; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo ${#x}"}, 96<<20)
	log := e.submit(d)
	out := e.wait(log)
	require.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOOMKilled), out.Code, "%s; events %v", out.Message, eventSummary(log))
	require.NotEmpty(t, out.ResultCommitSHA, "the outcome names the imported result: %s", out.Message)
	assert.Contains(t, out.Message, "imported as "+out.ResultCommitSHA)
	assert.Equal(t, out.ResultCommitSHA, e.git("rev-parse", "refs/heads/"+example.Branch))
	assert.Equal(t, "written before the oom", e.git("show", example.Branch+":kept.txt"))
	require.NotEmpty(t, out.Causes, "the worker's own account is kept as the cause")
	assert.Equal(t, string(failure.SandboxChildResultUnknown), out.Causes[0].Code)
}

func TestEndToEndAdmissionHoldsWhatEachDispatchAsksFor(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := engine.Info(ctx)
	require.NoError(t, err)
	const worker = 10 << 30 // each attempt asks for 10 GiB + 128 MiB overhead
	need := int64(worker + 128<<20)
	// The reserve leaves this host 1.5 attempts' worth of memory.
	e := newE2E(t, runner.Config{QueueLimit: 4, Capacity: preflight.CapacityPolicy{HostReserveBytes: info.MemTotal - need*3/2}})

	huge := e.dispatch(nil, 2*worker)
	reply, err := e.runner.Submit(huge)
	require.NoError(t, err)
	assert.False(t, reply.Accepted)
	assert.Equal(t, string(failure.DispatchExceedsHost), reply.Code)
	assert.Contains(t, reply.Message, "needs 20.1 GiB of memory (worker 20.0 GiB + services 0 B + runtime overhead 128.0 MiB)")
	assert.Contains(t, reply.Message, "this host offers at most 15.2 GiB of memory after its reserve")

	first := e.dispatch([]string{"/bin/sh", "-c", "sleep 3; echo first > first.txt"}, worker)
	second := e.dispatch([]string{"/bin/sh", "-c", "echo second > second.txt"}, worker)
	firstLog := e.submit(first)
	reply, err = e.runner.Submit(second)
	require.NoError(t, err)
	require.True(t, reply.Accepted, "%+v", reply)
	assert.True(t, reply.Queued, "the second fits only once the first is done")
	t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, second.AttemptID()) })
	secondLog, ok := e.runner.Logs().Get(second.AttemptID())
	require.True(t, ok)

	firstOut := e.wait(firstLog)
	require.Equal(t, messages.StatusSucceeded, firstOut.Status, "%s: %s", firstOut.Code, firstOut.Message)
	secondOut := e.wait(secondLog)
	require.Equal(t, messages.StatusSucceeded, secondOut.Status, "%s: %s", secondOut.Code, secondOut.Message)
	// One after the other: the second prepared its input after the first
	// had finished, so it built on the first's result.
	assert.False(t, secondLog.Events()[0].OccurredAt.Before(firstOut.FinishedAt), "the second started after the first finished")
	assert.Equal(t, firstOut.ResultCommitSHA, e.git("rev-parse", example.Branch+"^"))
	assert.Equal(t, "first", e.git("show", example.Branch+":first.txt"))
}

func TestEndToEndSandboxMetadataEvent(t *testing.T) {
	e := newE2E(t, runner.Config{})
	d := e.dispatch(nil, 0)
	log := e.submit(d)
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	for _, ev := range log.Events() {
		if ev.EventType != "sandbox_metadata" {
			continue
		}
		var data map[string]string
		require.NoError(t, json.Unmarshal([]byte(*ev.Data), &data))
		assert.Equal(t, e.git("rev-parse", "main"), data["inputCommitSha"])
		assert.Equal(t, e.git("rev-parse", "main"), data["sandboxConfigCommitSha"])
		assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, data["imageDigest"])
		assert.NotEmpty(t, data["contractDigest"])
		return
	}
	t.Fatalf("no sandbox_metadata event; events %v", eventSummary(log))
}
