package actors

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
)

// restartingEngine runs a worker whose engine restarts mid-run: the
// attached stream carries the first lines, then dockerd goes away
// (dockerops.EngineAwayError); the first question after that gets no
// answer either; then the engine answers again with the worker running
// on, its event log holding what it wrote meanwhile, and a re-attached
// stream that overlaps the log.
type restartingEngine struct {
	reattachEngine
	first     [][]byte
	live      bool
	inspects  atomic.Int32
	reattachs atomic.Int32
}

func (e *restartingEngine) CreateWorker(context.Context, dockerops.WorkerSpec) (string, error) {
	return "c0ffee", nil
}
func (e *restartingEngine) CopyFileInto(context.Context, string, string, string, io.Reader, int64, int, int, int64) error {
	return nil
}
func (e *restartingEngine) RunAttached(_ context.Context, id string, _ []byte, onLine func([]byte) error, _ dockerops.RunLimits) (dockerops.RunResult, error) {
	for _, line := range e.first {
		if err := onLine(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			return dockerops.RunResult{ExitCode: -1}, err
		}
	}
	away := &dockerops.EngineAwayError{ContainerID: id, Err: errors.New("Cannot connect to the Docker daemon")}
	return dockerops.RunResult{ExitCode: -1}, failure.Wrap(failure.SandboxRuntimeFailed, away, "the worker's run lost the engine")
}
func (e *restartingEngine) InspectState(context.Context, string) (dockerops.ContainerState, error) {
	if e.inspects.Add(1) == 1 {
		return dockerops.ContainerState{}, errors.New("Cannot connect to the Docker daemon")
	}
	return dockerops.ContainerState{Status: "exited"}, nil
}
func (e *restartingEngine) Reattach(ctx context.Context, id string, caught func(context.Context) error, onLine func([]byte) error, limits dockerops.RunLimits) (dockerops.RunResult, error) {
	e.reattachs.Add(1)
	return e.reattachEngine.Reattach(ctx, id, caught, onLine, limits)
}
func (e *restartingEngine) LiveRestore(context.Context) (bool, error) { return e.live, nil }

// runWorker runs a worker actor on engine and returns what it reported.
func runWorker(t *testing.T, engine *restartingEngine, key []byte) ([]any, WorkerExited) {
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	bundle := filepath.Join(t.TempDir(), "repo.bundle")
	require.NoError(t, os.WriteFile(bundle, []byte("bundle"), 0o600))
	job := workerJob{bundlePath: bundle, eventKey: key, runTimeout: time.Minute}
	sys.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &relay{child: newWorkerProps(engine, job), to: probe.PID()}
	}))
	exited := actortest.Expect[WorkerExited](t, probe, 10*time.Second)
	return probe.Received(), exited
}

// TestWorkerReattachesWhenALiveRestoreEngineRestarts: on an engine with
// live-restore, a run whose engine went away waits for it, re-attaches
// from the event sequence reached, delivers what the worker logged
// meanwhile once (as logged) and the stream's overlap not at all, and
// ends as the worker does.
func TestWorkerReattachesWhenALiveRestoreEngineRestarts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	lines := signedLines(t, key, 0, 6)
	engine := &restartingEngine{first: lines[:3], live: true,
		reattachEngine: reattachEngine{log: bytes.Join(lines[:5], nil), stream: lines[3:]}}
	received, exited := runWorker(t, engine, key)
	require.NoError(t, exited.Err)
	assert.Equal(t, int32(1), engine.reattachs.Load())
	var got []string
	for _, m := range received {
		switch m := m.(type) {
		case WorkerOutput:
			assert.False(t, m.Replayed, "nothing is replayed to the attempt that saw it")
			tag := m.Event.Content
			if m.Logged {
				tag += "(logged)"
			}
			got = append(got, tag)
		case WorkerReattached:
			got = append(got, "reattached@"+string(rune('0'+m.ResumeAt)))
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "reattached@3", "d(logged)", "e(logged)", "f"}, got)
}

// TestWorkerWithoutLiveRestoreEndsWithTheEngine: without live-restore
// (dockerd stops its containers when it stops) nothing is re-attached:
// the run ends sandbox_runtime_failed, naming the engine.
func TestWorkerWithoutLiveRestoreEndsWithTheEngine(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	lines := signedLines(t, key, 0, 6)
	engine := &restartingEngine{first: lines[:3], reattachEngine: reattachEngine{log: bytes.Join(lines[:5], nil), stream: lines[3:]}}
	_, exited := runWorker(t, engine, key)
	assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(exited.Err))
	assert.Contains(t, exited.Err.Error(), "no answer from the Docker engine")
	assert.Zero(t, engine.reattachs.Load())
}
