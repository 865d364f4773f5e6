package actors

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// runWithKernel runs one attempt on the fake host with the given kernel
// counters and returns its outcome and events.
func runWithKernel(t *testing.T, host *fakeHost, kernel KernelCounters) (messages.AttemptOutcome, []messages.AttemptEvent) {
	t.Helper()
	system := actortest.NewSystem(t)
	cfg := AttemptConfig{StateRoot: t.TempDir(), WorkerBinary: "/proc/self/exe", WorkerDigest: "d", SampleInterval: 10 * time.Millisecond}
	root := system.Spawn(supervisor.Props(supervisor.Config{
		Slots: 1, QueueLimit: 1, Cleaner: host, Ledgers: ledger.Store{Root: cfg.StateRoot},
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, sup *actor.PID) *actor.Props {
			return AttemptProps(d, subscriber, sup, cfg, Deps{Git: host, Docker: host, Kernel: kernel})
		},
	}))
	probe := system.NewProbe()
	res, err := system.Root.RequestFuture(root, messages.SubmitAttempt{Dispatch: testDispatch(time.Now().Add(time.Hour)), Subscriber: probe.PID()}, within).Result()
	require.NoError(t, err)
	require.True(t, res.(messages.SubmitReply).Accepted)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	return out, actortest.All[messages.AttemptEvent](probe)
}

func eventLine(t *testing.T, eventType string, data any) string {
	t.Helper()
	raw, err := json.Marshal(messages.RunnerEventLine{Type: messages.RunnerEventType, Event: messages.RunnerEvent(eventType, "x", data)})
	require.NoError(t, err)
	return string(raw)
}

func TestAttemptClassifiesFromTheKernelsCounters(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.exitCode = 1
	host.state = dockerops.ContainerState{Running: true, Pid: 4242, ExitCode: 1}
	host.lines = []string{eventLine(t, "task_output", nil)} // what the task prints is not a fact
	host.workerEvents = []messages.Event{
		messages.RunnerEvent(messages.TaskResourcesEvent, "x", messages.TaskResources{TaskFailed: true, TaskExitCode: 2, MaxProcesses: 12}),
		messages.RunnerEvent(outputWrittenEvent, "x", map[string]int{"exitCode": 1}),
	}
	kernel := &fakeKernel{reading: cgroups.Reading{MemoryPeakBytes: 64 << 20, PeakKnown: true, PidsMaxEvents: 5, PidsKnown: true, OOMKnown: true, CPUKnown: true, CPUUsageNanos: 1e9}}
	out, events := runWithKernel(t, host, kernel)

	assert.Equal(t, string(failure.SandboxPIDExhausted), out.Code, out.Message)
	assert.Contains(t, out.Message, "host saw pids.max (128) reached: 5 fork(s) refused; task exited 2; worker exited 1")
	require.NotNil(t, out.Telemetry)
	assert.Equal(t, messages.TelemetryKernelPeak, out.Telemetry.Source)
	assert.Equal(t, uint64(64<<20), out.PeakMemoryBytes)
	assert.True(t, out.Telemetry.FinalReading)
	assert.Equal(t, 1, host.called("release"), "the worker is released after the last reading")

	var observed []string
	for _, ev := range events {
		if ev.Event.EventType == "sandbox_peak_memory_observed" {
			observed = append(observed, *ev.Event.Data)
		}
	}
	require.Len(t, observed, 1)
	var tel messages.SandboxTelemetry
	require.NoError(t, json.Unmarshal([]byte(observed[0]), &tel))
	require.NoError(t, tel.Validate())
	assert.Equal(t, uint64(5), tel.Containers[0].PidsMaxEvents)
}

func TestAttemptEngineStatsFallbackAndNoResourceFailure(t *testing.T) {
	// No kernel counters (a remote engine): the record comes from stats,
	// and a task that merely failed is sandbox_worker_failed.
	host := newFakeHost(t.TempDir())
	host.exitCode = 1
	host.state = dockerops.ContainerState{Running: true, Pid: 4242, ExitCode: 1}
	host.workerEvents = []messages.Event{messages.RunnerEvent(outputWrittenEvent, "x", nil)}
	out, _ := runWithKernel(t, host, &fakeKernel{openErr: assert.AnError})
	assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code, out.Message)
	require.NotNil(t, out.Telemetry)
	assert.Equal(t, messages.TelemetryEngineStats, out.Telemetry.Source)
	assert.Equal(t, uint64(42<<20), out.PeakMemoryBytes)

	// The kernel keeps no count of EMFILE: the worker's report is taken.
	host = newFakeHost(t.TempDir())
	host.exitCode = 1
	host.workerEvents = []messages.Event{
		messages.RunnerEvent(messages.TaskResourcesEvent, "x", messages.TaskResources{TaskFailed: true, TaskExitCode: 1, FDExhausted: true, MaxOpenFiles: 4096, FDLimit: 4096}),
		messages.RunnerEvent(outputWrittenEvent, "x", nil),
	}
	out, _ = runWithKernel(t, host, &fakeKernel{openErr: assert.AnError})
	assert.Equal(t, string(failure.SandboxFDExhausted), out.Code, out.Message)
	assert.True(t, strings.Contains(out.Message, "worker saw a task process hold 4096 descriptors"), out.Message)
}
