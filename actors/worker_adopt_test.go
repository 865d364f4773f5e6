package actors

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// reattachEngine is a worker container a previous forged started: its
// event log, and the lines its re-attached stream carries.
type reattachEngine struct {
	log    []byte
	logErr error // ReadFileOut's error instead of the log
	stream [][]byte
}

func (e *reattachEngine) CreateWorker(context.Context, dockerops.WorkerSpec) (string, error) {
	panic("a re-adopted worker is never created")
}
func (e *reattachEngine) CopyFileInto(context.Context, string, string, string, io.Reader, int64, int, int, int64) error {
	panic("a re-adopted worker gets no input")
}
func (e *reattachEngine) RunAttached(context.Context, string, []byte, func([]byte) error, dockerops.RunLimits) (dockerops.RunResult, error) {
	panic("a re-adopted worker is never started")
}
func (e *reattachEngine) InspectState(context.Context, string) (dockerops.ContainerState, error) {
	return dockerops.ContainerState{Status: "exited"}, nil
}
func (e *reattachEngine) ReadFileOut(context.Context, string, string, int64, failure.Code) ([]byte, error) {
	return e.log, e.logErr
}
func (e *reattachEngine) Reattach(ctx context.Context, _ string, caught func(context.Context) error, onLine func([]byte) error, _ dockerops.RunLimits) (dockerops.RunResult, error) {
	if err := caught(ctx); err != nil {
		return dockerops.RunResult{ExitCode: -1}, err
	}
	for _, line := range e.stream {
		if err := onLine(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			return dockerops.RunResult{ExitCode: -1}, err
		}
	}
	return dockerops.RunResult{ExitCode: 0}, nil
}

// relay is the worker actor's parent in these tests: it forwards what the
// worker reports to a probe.
type relay struct {
	child *actor.Props
	to    *actor.PID
}

func (r *relay) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.Spawn(r.child)
	case WorkerOutput, WorkerExited, WorkerReattached:
		ctx.Send(r.to, msg)
	}
}

func signedLines(t *testing.T, key []byte, from, to int) [][]byte {
	var lines [][]byte
	for i := from; i < to; i++ {
		line, err := messages.SignEventLine(key, uint64(i), messages.RunnerEvent("step", string(rune('a'+i)), nil))
		require.NoError(t, err)
		lines = append(lines, line)
	}
	return lines
}

// readopt runs an adopted worker actor on engine, resumed at resumeAt, and
// returns what it reported.
func readopt(t *testing.T, engine *reattachEngine, key []byte, resumeAt uint64) ([]WorkerOutput, WorkerExited) {
	sys := actortest.NewSystem(t)
	probe := sys.NewProbe()
	job := adoptedWorkerJob{containerID: "c0ffee", eventKey: key, resumeAt: resumeAt, runTimeout: time.Minute}
	sys.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &relay{child: newAdoptedWorkerProps(engine, job), to: probe.PID()}
	}))
	exited := actortest.Expect[WorkerExited](t, probe, 10*time.Second)
	var outputs []WorkerOutput
	for _, m := range probe.Received() {
		if o, ok := m.(WorkerOutput); ok {
			outputs = append(outputs, o)
		}
	}
	return outputs, exited
}

// TestAdoptedWorkerResumesExactly: the log's events below the recorded
// sequence are replayed (the sampler's only), the rest delivered once, the
// stream's overlap with the log dropped, and a line the key does not sign
// stays the agent's.
func TestAdoptedWorkerResumesExactly(t *testing.T) {
	key := messages.EventKey("readopt")
	lines := signedLines(t, key, 0, 7)
	forged := signedLines(t, messages.EventKey("guess"), 7, 8)[0]
	engine := &reattachEngine{
		log:    bytes.Join(lines[:5], nil),
		stream: append(append([][]byte{}, lines[3:]...), forged),
	}
	outputs, exited := readopt(t, engine, key, 2)
	require.NoError(t, exited.Err)
	var replayed, delivered []string
	for _, o := range outputs {
		if o.Replayed {
			replayed = append(replayed, o.Event.Content)
		} else {
			delivered = append(delivered, o.Event.Role+":"+o.Event.Content)
		}
	}
	assert.Equal(t, []string{"a", "b"}, replayed)
	assert.Equal(t, []string{"runner:c", "runner:d", "runner:e", "runner:f", "runner:g", "agent:h"}, delivered)
	assert.Equal(t, uint64(7), outputs[len(outputs)-2].Next, "the sequence reached after the stream")
}

// TestAdoptedWorkerRefusesADamagedLog: a log with a gap, or shorter than
// what the previous process delivered, ends the run with
// sandbox_event_log_invalid; nothing of it is delivered.
func TestAdoptedWorkerRefusesADamagedLog(t *testing.T) {
	key := messages.EventKey("readopt")
	lines := signedLines(t, key, 0, 4)
	cases := map[string]struct {
		log      []byte
		resumeAt uint64
	}{
		"a gap":               {bytes.Join([][]byte{lines[0], lines[2]}, nil), 0},
		"shorter than seen":   {bytes.Join(lines[:2], nil), 3},
		"another key":         {bytes.Join(signedLines(t, messages.EventKey("other"), 0, 2), nil), 0},
		"a task's line in it": {append(append([]byte{}, lines[0]...), []byte("planted\n")...), 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			outputs, exited := readopt(t, &reattachEngine{log: c.log}, key, c.resumeAt)
			require.Error(t, exited.Err)
			assert.Equal(t, failure.SandboxEventLogInvalid, failure.CodeOf(exited.Err), "%v", exited.Err)
			assert.Empty(t, outputs)
		})
	}
}

// TestAdoptedWorkerWithoutALogYet: forged died just after starting the
// worker, before the worker opened its event log. With nothing delivered
// (sequence 0), the missing log is an empty one and every event comes from
// the stream; once something was delivered, a missing log is damage.
func TestAdoptedWorkerWithoutALogYet(t *testing.T) {
	key := messages.EventKey("readopt")
	lines := signedLines(t, key, 0, 3)
	missing := errdefs.NotFound(errors.New("Could not find the file /control/events.log in container c0ffee"))

	outputs, exited := readopt(t, &reattachEngine{logErr: missing, stream: lines}, key, 0)
	require.NoError(t, exited.Err)
	var delivered []string
	for _, o := range outputs {
		assert.False(t, o.Replayed)
		delivered = append(delivered, o.Event.Role+":"+o.Event.Content)
	}
	assert.Equal(t, []string{"runner:a", "runner:b", "runner:c"}, delivered)

	outputs, exited = readopt(t, &reattachEngine{logErr: missing, stream: lines}, key, 2)
	require.Error(t, exited.Err)
	assert.Equal(t, failure.SandboxEventLogInvalid, failure.CodeOf(exited.Err), "%v", exited.Err)
	assert.Empty(t, outputs)

	outputs, exited = readopt(t, &reattachEngine{logErr: errors.New("engine unreachable"), stream: lines}, key, 0)
	require.Error(t, exited.Err, "only a missing file is an empty log")
	assert.Equal(t, failure.SandboxEventLogInvalid, failure.CodeOf(exited.Err), "%v", exited.Err)
	assert.Empty(t, outputs)
}
