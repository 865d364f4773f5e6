package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// WorkerReattacher is what re-adopting a worker needs of the engine beyond
// WorkerDocker (dockerops.Client has it): reading the worker's event log
// out of the control volume, and re-attaching to its output.
type WorkerReattacher interface {
	ReadFileOut(ctx context.Context, containerID, file string, max int64, code failure.Code) ([]byte, error)
	Reattach(ctx context.Context, containerID string, caught func(context.Context) error, onStdoutLine func([]byte) error, limits dockerops.RunLimits) (dockerops.RunResult, error)
}

// adoptedWorkerJob is what the worker actor of a re-adopted attempt needs:
// the container a previous forged started, the event key, and the event
// sequence number the previous process delivered up to.
type adoptedWorkerJob struct {
	containerID string
	eventKey    []byte
	resumeAt    uint64
	storageFull func(ctx context.Context) string
	runTimeout  time.Duration
}

// newAdoptedWorkerProps is a worker actor that takes over a running (or
// exited) worker container instead of creating one: its first report is
// the events of the worker's log, then the live stream, then WorkerExited
// as usual.
func newAdoptedWorkerProps(docker WorkerDocker, job adoptedWorkerJob) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &workerActor{docker: docker, adopt: &job, containerID: job.containerID}
	})
}

// startAdopted re-attaches on one owned goroutine. The log is read once
// the stream is open (dockerops.Client.Reattach), checked whole
// (messages.ParseEventLog), and must reach at least the sequence number
// the previous process delivered; its events below that number go to the
// attempt as Replayed, the rest as new, and the stream resumes after the
// log's last line with a verifier that drops what the log delivered.
func (w *workerActor) startAdopted(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	docker, job, attemptCtx := w.docker, *w.adopt, w.runCtx
	runAsync(ctx, w.runCtx, "worker", func(runCtx context.Context) any {
		id := job.containerID
		engine, ok := docker.(WorkerReattacher)
		if !ok {
			return WorkerExited{ContainerID: id, Err: failure.New(failure.SandboxRuntimeFailed, "this engine client cannot re-attach a worker")}
		}
		runCtx, cancel := context.WithTimeout(runCtx, job.runTimeout)
		defer cancel()
		live := askLiveRestore(runCtx, docker)
		send := func(out WorkerOutput) { system.Root.Send(self, out) }
		result, next, runErr := reattachWorker(runCtx, engine, id, job.eventKey, job.resumeAt, true, send)
		result, runErr = afterEngineAway(runCtx, docker, live, id, job.eventKey, next, result, runErr, send,
			func(msg WorkerReattached) { system.Root.Send(self, msg) })
		return workerRunEnded(runCtx, attemptCtx, docker, id, result, runErr, job.runTimeout, job.storageFull)
	})
}

// reattachWorker re-attaches to the worker container id (running or
// exited) and resumes its events at resumeAt: the log is read once the
// stream is open (dockerops.Client.Reattach), checked whole
// (messages.ParseEventLog), and must reach at least resumeAt; its events
// below that number go to send as Replayed when replay is set (a new
// forged process's attempt has not seen them) and are dropped otherwise
// (this process delivered them), the rest as new, and the stream resumes
// after the log's last line with a verifier that drops what the log
// delivered. next is the sequence number of the first line not seen.
func reattachWorker(runCtx context.Context, engine WorkerReattacher, id string, eventKey []byte, resumeAt uint64, replay bool, send func(WorkerOutput)) (result dockerops.RunResult, next uint64, err error) {
	events := messages.NewResumedEventVerifier(eventKey, resumeAt)
	caught := func(ctx context.Context) error {
		data, err := engine.ReadFileOut(ctx, id, messages.EventLogPath, messages.MaxEventLogBytes, failure.SandboxEventLogInvalid)
		if err != nil && resumeAt == 0 && dockerops.IsNotFound(err) {
			// The worker had not opened its log yet (forged died just
			// after starting it): nothing was delivered, and the stream
			// carries every event from the first.
			data, err = nil, nil
		}
		if err != nil {
			if failure.CodeOf(err) == "" {
				err = failure.Wrap(failure.SandboxEventLogInvalid, err, "read the worker's event log")
			}
			return err
		}
		logged, err := messages.ParseEventLog(eventKey, data)
		if err != nil {
			return err
		}
		if uint64(len(logged)) < resumeAt {
			return failure.New(failure.SandboxEventLogInvalid, "the worker's event log ends at %d lines, before the %d forged had delivered", len(logged), resumeAt)
		}
		for _, le := range logged {
			if le.Seq < resumeAt && !replay {
				continue
			}
			send(WorkerOutput{Event: le.Event, Next: le.Seq + 1, Replayed: le.Seq < resumeAt, Logged: le.Seq >= resumeAt})
		}
		events = messages.NewResumedEventVerifier(eventKey, uint64(len(logged)))
		return nil
	}
	result, err = engine.Reattach(runCtx, id, caught, func(line []byte) error {
		ev, err := events.Parse(line)
		if err != nil {
			return err
		}
		if ev != nil {
			send(WorkerOutput{Event: *ev, Next: events.Next()})
		}
		return nil
	}, dockerops.RunLimits{})
	return result, events.Next(), err
}
