package actors

import (
	"context"
	"errors"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
)

// EngineReturnWait bounds how long a worker actor whose engine went away
// mid-run (dockerops.EngineAwayError) waits for it to answer again, when
// the engine runs with live-restore: the worker container runs on while
// dockerd restarts, and forged re-attaches to it.
const EngineReturnWait = 90 * time.Second

// engineRetry is the pause between two questions to an engine that does
// not answer yet (each question is itself retried by dockerops).
const engineRetry = 500 * time.Millisecond

// LiveRestorer is what the worker actor asks of the engine before a run
// (dockerops.Client has it): whether its containers outlive a restart of
// dockerd. An engine client without it is taken as without live-restore.
type LiveRestorer interface {
	LiveRestore(ctx context.Context) (bool, error)
}

// WorkerReattached tells the attempt that its worker's run lost the
// engine (dockerd restarted) and that the worker actor re-attached to the
// container, which ran on, resuming its events at ResumeAt.
type WorkerReattached struct {
	ContainerID string
	ResumeAt    uint64
}

// askLiveRestore asks the engine whether it keeps the worker running
// across its own restart (any doubt is no), beside the run rather than
// before it: the answer is awaited only once the engine went away, and
// the question (one engine call, bounded by dockerops) ends on its own.
// It must be asked while the engine answers: during its restart nobody
// can say.
func askLiveRestore(ctx context.Context, docker WorkerDocker) func() bool {
	lr, ok := docker.(LiveRestorer)
	if !ok {
		return func() bool { return false }
	}
	answer := make(chan bool, 1)
	go func() {
		on, err := lr.LiveRestore(ctx)
		answer <- err == nil && on
	}()
	return func() bool { return <-answer }
}

// afterEngineAway is the run's end once its engine went away: with
// live-restore, and once the engine answers again about the container
// (within EngineReturnWait), the worker is re-attached from resumeAt, the
// event sequence reached (reattachWorker: the signed event log in the
// control volume fills the gap), as often as the engine goes away again,
// and the last run's end is returned; otherwise the run's own end stands.
// notify is told before each re-attachment.
func afterEngineAway(runCtx context.Context, docker WorkerDocker, live func() bool, id string, eventKey []byte, resumeAt uint64,
	result dockerops.RunResult, runErr error, send func(WorkerOutput), notify func(WorkerReattached)) (dockerops.RunResult, error) {
	var away *dockerops.EngineAwayError
	engine, ok := docker.(WorkerReattacher)
	if !ok || !errors.As(runErr, &away) || !live() {
		return result, runErr
	}
	for errors.As(runErr, &away) && runCtx.Err() == nil {
		if err := awaitEngine(runCtx, docker, id); err != nil {
			return result, err
		}
		notify(WorkerReattached{ContainerID: id, ResumeAt: resumeAt})
		result, resumeAt, runErr = reattachWorker(runCtx, engine, id, eventKey, resumeAt, false, send)
	}
	return result, runErr
}

// awaitEngine waits, up to EngineReturnWait, until the engine answers
// about container id again.
func awaitEngine(ctx context.Context, docker WorkerDocker, id string) error {
	ctx, cancel := context.WithTimeout(ctx, EngineReturnWait)
	defer cancel()
	for {
		_, err := docker.InspectState(ctx, id)
		if err == nil {
			return nil
		}
		if dockerops.IsNotFound(err) {
			return failure.Wrap(failure.SandboxRuntimeFailed, err, "the worker container is gone after the engine restarted")
		}
		select {
		case <-ctx.Done():
			return failure.Wrap(failure.SandboxRuntimeFailed, err, "the Docker engine did not answer again within %s", EngineReturnWait)
		case <-time.After(engineRetry):
		}
	}
}
