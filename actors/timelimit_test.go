package actors

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/messages"
)

func limitHarness(t *testing.T, host *fakeHost, limits timelimit.Limits) (*harness, *clock.Manual) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarnessWith(t, host, clk, func(c *AttemptConfig) { c.Limits = limits; c.LimitGrace = 30 * time.Second })
	return h, clk
}

// waitRun waits until the worker runs and the attempt has armed its time
// limits (it announces sandbox_started right after).
func waitRun(t *testing.T, host *fakeHost, probe *actortest.Probe) {
	t.Helper()
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_started" })
}

func TestHostIdleLimitStopsASilentWorkerAfterItsGrace(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h, clk := limitHarness(t, host, timelimit.Limits{HardWall: time.Hour, Idle: 2 * time.Minute})
	d := testDispatch(clk.Now().Add(3 * time.Hour))
	probe := h.submit(t, d)
	waitRun(t, host, probe)

	clk.Advance(2*time.Minute - time.Second)
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 50*time.Millisecond)
	clk.Advance(time.Second)
	limit := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool {
		return m.Event.EventType == string(failure.SandboxIdleTimeout)
	})
	assert.Contains(t, limit.Event.Content, "no output for 2m0s")
	// The worker gets its grace to stop the task and write its output.
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 50*time.Millisecond)
	clk.Advance(30 * time.Second)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxIdleTimeout), out.Code)
	assert.Equal(t, 1, host.teardowns)
	assert.Zero(t, host.called("import"), "a worker stopped by the host leaves nothing to import")
}

func TestHostHardWallKeepsTheOutputOfAWorkerThatStopsInItsGrace(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	host.release = make(chan struct{})
	host.exitCode = 143
	// Output every minute keeps the idle limit away; the hard wall still comes.
	host.lines = nil
	h, clk := limitHarness(t, host, timelimit.Limits{HardWall: 2 * time.Hour, Idle: 10 * time.Minute})
	d := testDispatch(clk.Now().Add(5 * time.Hour))
	d.Task.TimeoutSeconds = 3600 // the dispatch shortens the hard wall to 1 h
	probe := h.submit(t, d)
	waitRun(t, host, probe)
	for range 59 {
		clk.Advance(time.Minute)
		h.system.Root.Send(h.attemptPID(t, d), WorkerOutput{Event: messages.RunnerEvent("task_output", "tick", nil)})
	}
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 50*time.Millisecond)
	clk.Advance(time.Minute)
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool {
		return m.Event.EventType == string(failure.SandboxHardWallExceeded)
	})
	close(host.release) // the worker stops its task and exits within the grace
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxHardWallExceeded), out.Code)
	assert.Contains(t, out.Message, "ran for 1h0m0s")
	assert.Equal(t, "3333333333333333333333333333333333333333", out.ResultCommitSHA)
	assert.Equal(t, 1, host.called("import"))
}

func TestWorkerJobCarriesTheLimits(t *testing.T) {
	a := &attemptActor{cfg: AttemptConfig{Limits: timelimit.Limits{HardWall: 2 * time.Hour, Idle: 5 * time.Minute}}.withDefaults(),
		d: testDispatch(time.Now().Add(time.Hour))}
	a.d.Task.TimeoutSeconds = 120
	l := a.limits()
	require.Equal(t, timelimit.Limits{HardWall: 2 * time.Minute, Idle: 2 * time.Minute}, l)
}

// The worker's own idle limit trails the host's, so that the host's
// trusted timer fires first (workerIdleMargin); the start packet carries
// it, bounded by the hard wall.
func TestWorkerIdleLimitTrailsTheHosts(t *testing.T) {
	assert.Equal(t, 65*time.Second, workerIdle(timelimit.Limits{HardWall: time.Hour, Idle: time.Minute}))
	assert.Equal(t, 2*time.Minute, workerIdle(timelimit.Limits{HardWall: 2 * time.Minute, Idle: 2 * time.Minute}))
	assert.Equal(t, 2*time.Minute, workerIdle(timelimit.Limits{HardWall: 2 * time.Minute, Idle: 119 * time.Second}))

	host := newFakeHost(t.TempDir())
	h, clk := limitHarness(t, host, timelimit.Limits{HardWall: time.Hour, Idle: 10 * time.Minute})
	probe := h.submit(t, testDispatch(clk.Now().Add(3*time.Hour)))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	host.mu.Lock()
	stdin := host.stdin
	host.mu.Unlock()
	var pkt messages.StartPacket
	require.NoError(t, json.Unmarshal(stdin, &pkt))
	assert.Equal(t, 605, pkt.IdleTimeoutSeconds)
	assert.Equal(t, 3600, pkt.TaskTimeoutSeconds)
}

// attemptPID is the running attempt's pid under the harness's supervisor.
func (h *harness) attemptPID(t *testing.T, d *messages.Dispatch) *actor.PID {
	t.Helper()
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	return actor.NewPID(h.root.Address, h.root.Id+"/attempt-"+names.AttemptHex)
}
