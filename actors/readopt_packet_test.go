package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// packetHost is a worker a previous forged started and died before
// handing it its start packet: no event log, and a stream that carries
// stream (nothing, or what the task wrote) before the worker exits 2.
type packetHost struct {
	*fakeHost
	stream [][]byte
}

func (h *packetHost) ReadFileOut(context.Context, string, string, int64, failure.Code) ([]byte, error) {
	return nil, errdefs.NotFound(errors.New("Could not find the file /control/events.log"))
}

func (h *packetHost) Reattach(ctx context.Context, _ string, caught func(context.Context) error, onLine func([]byte) error, _ dockerops.RunLimits) (dockerops.RunResult, error) {
	if err := caught(ctx); err != nil {
		return dockerops.RunResult{ExitCode: -1}, err
	}
	for _, line := range h.stream {
		if err := onLine(line); err != nil {
			return dockerops.RunResult{ExitCode: -1}, err
		}
	}
	return dockerops.RunResult{ExitCode: 2}, nil
}

// TestReadoptedWorkerThatNeverGotItsPacket: forged died between starting
// the worker and writing its start packet; the worker read EOF and exited
// 2 without a single signed event. The re-adopted attempt ends
// sandbox_runner_restarted (forged's doing), not sandbox_worker_failed.
// A task's unsigned line claiming to be the worker's changes nothing; one
// verified event (the worker did start) leaves the worker's failure.
func TestReadoptedWorkerThatNeverGotItsPacket(t *testing.T) {
	key := messages.EventKey("the-control-key")
	signed, err := messages.SignEventLine(key, 0, messages.RunnerEvent("workspace_materialized", "checked out", nil))
	require.NoError(t, err)
	forged, err := messages.SignEventLine(messages.EventKey("a guess"), 0, messages.RunnerEvent("workspace_materialized", "checked out", nil))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		stream [][]byte
		code   failure.Code
	}{
		"nothing":          {nil, failure.SandboxRunnerRestarted},
		"an unsigned line": {[][]byte{forged[:len(forged)-1]}, failure.SandboxRunnerRestarted},
		"a signed event":   {[][]byte{signed[:len(signed)-1]}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			root, hostKey, e := adoptable(t)
			e.Adoption.EventSeq = 0
			require.NoError(t, ledger.Store{Root: root}.Write(e))
			ad, err := LoadAdoption(root, e, hostKey)
			require.NoError(t, err)
			host := &packetHost{fakeHost: newFakeHost(t.TempDir()), stream: tc.stream}
			sys := actortest.NewSystem(t)
			probe := sys.NewProbe()
			cfg := AttemptConfig{StateRoot: root, HostKey: hostKey, WorkerBinary: "/proc/self/exe", WorkerDigest: "d",
				SampleInterval: time.Hour, Confinement: host.confinementFacts}
			sys.Spawn(supervisor.Props(supervisor.Config{
				Slots: 4, QueueLimit: 4, Cleaner: host, Ledgers: ledger.Store{Root: root},
				Adopt: func(*actor.ActorSystem) []supervisor.Adoption {
					return []supervisor.Adoption{{Dispatch: ad.Dispatch, Subscriber: probe.PID(), NewAttempt: func(sub, sup *actor.PID) *actor.Props {
						return AdoptedAttemptProps(ad, sub, sup, cfg, Deps{Git: host, Docker: host})
					}}}
				},
			}))
			out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
			require.Equal(t, messages.StatusFailed, out.Status)
			if tc.code != "" {
				assert.Equal(t, string(tc.code), out.Code, out.Message)
				assert.Contains(t, out.Message, "start packet")
			} else {
				assert.NotEqual(t, string(failure.SandboxRunnerRestarted), out.Code, out.Message)
			}
		})
	}
}

// TestReadoptedAttemptReportsItsIsolation: a re-adopted attempt's outcome
// names the isolation and the worker's runtime its ledger recorded (the
// attempt decided them before the restart).
func TestReadoptedAttemptReportsItsIsolation(t *testing.T) {
	root, hostKey, e := adoptable(t)
	e.Isolation, e.WorkerRuntime = messages.IsolationGVisor, "runsc"
	require.NoError(t, ledger.Store{Root: root}.Write(e))
	ad, err := LoadAdoption(root, e, hostKey)
	require.NoError(t, err)
	host := &packetHost{fakeHost: newFakeHost(t.TempDir())}
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	cfg := AttemptConfig{StateRoot: root, HostKey: hostKey, WorkerBinary: "/proc/self/exe", WorkerDigest: "d",
		SampleInterval: time.Hour, Confinement: host.confinementFacts}
	sys.Spawn(supervisor.Props(supervisor.Config{
		Slots: 4, QueueLimit: 4, Cleaner: host, Ledgers: ledger.Store{Root: root},
		Adopt: func(*actor.ActorSystem) []supervisor.Adoption {
			return []supervisor.Adoption{{Dispatch: ad.Dispatch, Subscriber: probe.PID(), NewAttempt: func(sub, sup *actor.PID) *actor.Props {
				return AdoptedAttemptProps(ad, sub, sup, cfg, Deps{Git: host, Docker: host})
			}}}
		},
	}))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.IsolationGVisor, out.Isolation)
	assert.Equal(t, "runsc", out.WorkerRuntime)
}
