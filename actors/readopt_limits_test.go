package actors

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// adoptHost is the fake host whose worker a previous forged started: its
// event log, and a re-attached stream that stays open until the attempt
// stops it.
type adoptHost struct {
	*fakeHost
	log      []byte
	attached chan struct{} // closed once the stream is re-attached (the limits are armed before)
}

func (h *adoptHost) ReadFileOut(context.Context, string, string, int64, failure.Code) ([]byte, error) {
	return h.log, nil
}

func (h *adoptHost) Reattach(ctx context.Context, _ string, caught func(context.Context) error, _ func([]byte) error, _ dockerops.RunLimits) (dockerops.RunResult, error) {
	if err := caught(ctx); err != nil {
		return dockerops.RunResult{ExitCode: -1}, err
	}
	close(h.attached)
	<-ctx.Done()
	return dockerops.RunResult{ExitCode: -1}, ctx.Err()
}

// limitsAcrossRestart re-adopts an attempt whose worker was created
// created ago and whose last output the previous process saw idle ago
// (both before now, the manual clock's start); logged are the times of the
// events the worker wrote while no forged ran. It returns the probe of
// the attempt's events and the clock, once the attempt has armed its limits.
func limitsAcrossRestart(t *testing.T, limits timelimit.Limits, created, idle time.Duration, logged ...time.Duration) (*actortest.Probe, *clock.Manual) {
	t.Helper()
	root, hostKey, e := adoptable(t)
	now := time.Now().UTC().Truncate(time.Second)
	clk := clock.NewManual(now)
	key := messages.EventKey("the-control-key")
	var log [][]byte
	for i := range 3 + len(logged) {
		ev := messages.RunnerEvent("task_output", "line", nil)
		if i >= 3 {
			ev.OccurredAt = now.Add(-logged[i-3])
		}
		line, err := messages.SignEventLine(key, uint64(i), ev)
		require.NoError(t, err)
		log = append(log, line)
	}
	e.Adoption.EventSeq = 3 // the first three were delivered before the restart
	e.Adoption.WorkerCreatedAt = now.Add(-created)
	if idle > 0 {
		e.Adoption.IdleSince = now.Add(-idle)
	}
	require.NoError(t, ledger.Store{Root: root}.Write(e))
	ad, err := LoadAdoption(root, e, hostKey)
	require.NoError(t, err)

	host := &adoptHost{fakeHost: newFakeHost(t.TempDir()), log: bytes.Join(log, nil), attached: make(chan struct{})}
	sys := actortest.NewSystem(t, actortest.WithClock(clk))
	probe := sys.NewProbe()
	cfg := AttemptConfig{StateRoot: root, HostKey: hostKey, WorkerBinary: "/proc/self/exe", WorkerDigest: "d", Clock: clk,
		SampleInterval: time.Hour, Limits: limits, LimitGrace: 30 * time.Second, Confinement: host.confinementFacts}
	sys.Spawn(supervisor.Props(supervisor.Config{
		Slots: 4, QueueLimit: 4, Cleaner: host, Ledgers: ledger.Store{Root: root},
		Adopt: func(*actor.ActorSystem) []supervisor.Adoption {
			return []supervisor.Adoption{{Dispatch: ad.Dispatch, Subscriber: probe.PID(), NewAttempt: func(sub, sup *actor.PID) *actor.Props {
				return AdoptedAttemptProps(ad, sub, sup, cfg, Deps{Git: host, Docker: host})
			}}}
		},
	}))
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_readopted" })
	select {
	case <-host.attached: // the attempt armed its limits before it spawned the worker
	case <-time.After(within):
		t.Fatal("the worker was never re-attached")
	}
	for range logged { // the events logged while away are delivered: the idle limit has moved on
		actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "task_output" })
	}
	return probe, clk
}

// expectLimit advances the clock to just before left, expects nothing,
// then to left, and expects the limit of code.
func expectLimit(t *testing.T, probe *actortest.Probe, clk *clock.Manual, left time.Duration, code failure.Code) {
	t.Helper()
	clk.Advance(left - time.Second)
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 50*time.Millisecond)
	for _, m := range probe.Received() {
		if ev, ok := m.(messages.AttemptEvent); ok {
			require.NotEqual(t, string(failure.SandboxIdleTimeout), ev.Event.EventType, "a limit fired before %s", left)
			require.NotEqual(t, string(failure.SandboxHardWallExceeded), ev.Event.EventType, "a limit fired before %s", left)
		}
	}
	clk.Advance(time.Second)
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == string(code) })
	// The grace (30 s), armed just after the limit's event: the host then
	// stops the worker. The clock moves a second at a time until it has.
	var out *messages.AttemptOutcome
	require.Eventually(t, func() bool {
		for _, m := range probe.Received() {
			if f, ok := m.(messages.AttemptFinished); ok {
				out = &f.Outcome
				return true
			}
		}
		clk.Advance(time.Second)
		return false
	}, within, 5*time.Millisecond, "the attempt did not end after the grace")
	require.Equal(t, string(code), out.Code, out.Message)
}

// TestReadoptedIdleLimitContinuesFromTheLastOutput: the previous process
// saw the worker's last output 8 minutes before the restart; with an idle
// limit of 10 minutes, the re-adopted attempt is idle 2 minutes later,
// not 10.
func TestReadoptedIdleLimitContinuesFromTheLastOutput(t *testing.T) {
	probe, clk := limitsAcrossRestart(t, timelimit.Limits{HardWall: 50 * time.Minute, Idle: 10 * time.Minute}, 20*time.Minute, 8*time.Minute)
	expectLimit(t, probe, clk, 2*time.Minute, failure.SandboxIdleTimeout)
}

// TestReadoptedIdleLimitCountsTheOutputWrittenWhileAway: the worker wrote
// two lines while forged was down, the last one a minute before the
// restart: the idle limit runs from that line (9 minutes left), not from
// the last output the previous process saw, nor from the restart.
func TestReadoptedIdleLimitCountsTheOutputWrittenWhileAway(t *testing.T) {
	probe, clk := limitsAcrossRestart(t, timelimit.Limits{HardWall: 50 * time.Minute, Idle: 10 * time.Minute}, 20*time.Minute, 8*time.Minute,
		4*time.Minute, time.Minute)
	expectLimit(t, probe, clk, 9*time.Minute, failure.SandboxIdleTimeout)
}

// TestReadoptedHardWallContinuesFromTheWorkersCreation: a worker created
// 49 minutes before the restart, with a 50 minute hard wall and recent
// output, meets its hard wall a minute after the re-adoption.
func TestReadoptedHardWallContinuesFromTheWorkersCreation(t *testing.T) {
	probe, clk := limitsAcrossRestart(t, timelimit.Limits{HardWall: 50 * time.Minute, Idle: 10 * time.Minute}, 49*time.Minute, 30*time.Second)
	expectLimit(t, probe, clk, time.Minute, failure.SandboxHardWallExceeded)
}
