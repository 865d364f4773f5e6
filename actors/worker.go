package actors

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

const kindWorker = "worker"

// runMargin is added to the task timeout to bound the run (the worker
// enforces the task timeout itself; this is the host's backstop). Each
// Docker call is bounded by dockerops.Options.
const runMargin = 2 * time.Minute

// WorkerCreated tells the attempt the worker container exists.
type WorkerCreated struct {
	ContainerID string
}

// WorkerOutput carries one event the worker streamed on stdout. Next is
// the sequence number of the next worker line the host has not seen (0
// when unknown); Replayed marks an event a re-adopted worker's log
// delivered before the restart (readopt.go): only the sampler takes it.
type WorkerOutput struct {
	Event    messages.Event
	Next     uint64
	Replayed bool
	// Logged: read from the worker's event log at a re-adoption, not yet
	// delivered (the worker wrote it while no forged was there): its own
	// time, not the host's, says when it was written.
	Logged bool
}

// WorkerExited is the worker actor's final report. Err is set when the run
// could not complete (create, copy or attach failed, cancellation, an
// invalid event); otherwise ExitCode and State describe how it ended.
type WorkerExited struct {
	ContainerID string
	ExitCode    int
	Stderr      string
	State       dockerops.ContainerState
	// StorageFull, when not empty, says which bounded volumes the host
	// found full once the worker exited (a host fact, see quota.Usage).
	StorageFull string
	Err         error
}

// CancelWorker asks the worker to stop its container and report.
type CancelWorker struct{}

// workerJob is everything the worker actor needs.
type workerJob struct {
	spec       dockerops.WorkerSpec
	bundlePath string
	// bundlePlaced: the control volume already holds the bundle.
	bundlePlaced bool
	startPacket  []byte
	// eventKey authenticates the worker's own events (see
	// messages.EventVerifier); every other line arrives as the agent's.
	eventKey []byte
	// storageFull, when set, measures the bounded volumes after the
	// worker exited (see WorkerExited.StorageFull).
	storageFull func(ctx context.Context) string
	runTimeout  time.Duration
	limits      dockerops.RunLimits
}

// workerActor runs the hardened worker container once. It is never
// restarted: a sandbox run is not idempotent.
type workerActor struct {
	docker WorkerDocker
	job    workerJob
	adopt  *adoptedWorkerJob // set: take over a running worker (worker_adopt.go)

	runCtx      context.Context
	cancel      context.CancelFunc
	phase       string
	containerID string
	events      int
}

type workerContainerCreated struct{ id string }

func newWorkerProps(docker WorkerDocker, job workerJob) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &workerActor{docker: docker, job: job} })
}

func (w *workerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		w.runCtx, w.cancel = context.WithCancel(context.Background())
		if w.adopt != nil {
			w.phase = "re-attached"
			w.startAdopted(ctx)
			return
		}
		w.phase = "creating"
		w.start(ctx)
	case workerContainerCreated:
		w.containerID = msg.id
		w.phase = "running"
		ctx.Send(ctx.Parent(), WorkerCreated{ContainerID: msg.id})
	case WorkerOutput:
		w.events++
		ctx.Send(ctx.Parent(), msg)
	case WorkerReattached:
		w.phase = "re-attached"
		ctx.Send(ctx.Parent(), msg)
	case WorkerExited:
		w.phase = "exited"
		ctx.Send(ctx.Parent(), msg)
		ctx.Stop(ctx.Self())
	case asyncPanic:
		ctx.Send(ctx.Parent(), WorkerExited{ContainerID: w.containerID, Err: failure.New(failure.SandboxRuntimeFailed, "%s", msg.Error())})
		ctx.Stop(ctx.Self())
	case CancelWorker:
		w.phase = "cancelling"
		w.cancel()
	case *actor.Stopping:
		if w.cancel != nil {
			w.cancel()
		}
	case messages.Inspect:
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindWorker, Phase: w.phase, Facts: map[string]string{
			"container": w.job.spec.Name, "containerId": w.containerID, "image": w.job.spec.Image,
		}})
	}
}

// start runs the whole container lifecycle on one owned goroutine; progress
// comes back to the actor as messages.
func (w *workerActor) start(ctx actor.Context) {
	// The goroutine reads only what it captures here; dockerops bounds each
	// engine call, the job's run timeout bounds the task.
	system, self := ctx.ActorSystem(), ctx.Self()
	docker, job, attemptCtx := w.docker, w.job, w.runCtx
	runAsync(ctx, w.runCtx, "worker", func(runCtx context.Context) any {
		id, err := createWorker(runCtx, docker, job)
		if err != nil {
			return WorkerExited{Err: err}
		}
		system.Root.Send(self, workerContainerCreated{id: id})
		// A bundle the control volume's image holds is not copied again
		// (provisionStep).
		if !job.bundlePlaced {
			if err := copyBundle(runCtx, docker, job, id); err != nil {
				return WorkerExited{ContainerID: id, Err: err}
			}
		}
		runCtx, cancel := context.WithTimeout(runCtx, job.runTimeout)
		defer cancel()
		live := askLiveRestore(runCtx, docker)
		events := messages.NewEventVerifier(job.eventKey)
		send := func(out WorkerOutput) { system.Root.Send(self, out) }
		result, runErr := docker.RunAttached(runCtx, id, job.startPacket, func(line []byte) error {
			ev, err := events.Parse(line)
			if err != nil {
				return err
			}
			if ev != nil {
				send(WorkerOutput{Event: *ev, Next: events.Next()})
			}
			return nil
		}, job.limits)
		result, runErr = afterEngineAway(runCtx, docker, live, id, job.eventKey, events.Next(), result, runErr, send,
			func(msg WorkerReattached) { system.Root.Send(self, msg) })
		return workerRunEnded(runCtx, attemptCtx, docker, id, result, runErr, job.runTimeout, job.storageFull)
	})
}

// workerRunEnded is the WorkerExited of a run (started or re-attached)
// that ended with result and runErr: a run past its deadline while the
// attempt goes on is the worker's failure; otherwise the container's
// state and, after a failure, the bounded volumes the host finds full are
// read, on a context the run's end does not cancel.
func workerRunEnded(runCtx, attemptCtx context.Context, docker WorkerDocker, id string, result dockerops.RunResult, runErr error,
	runTimeout time.Duration, storageFull func(context.Context) string) WorkerExited {
	if runErr != nil {
		if errors.Is(runErr, context.DeadlineExceeded) && attemptCtx.Err() == nil {
			runErr = failure.Wrap(failure.SandboxWorkerFailed, runErr, "worker exceeded its run time of %s", runTimeout)
		}
		return WorkerExited{ContainerID: id, Stderr: result.Stderr, Err: runErr}
	}
	afterCtx := context.WithoutCancel(runCtx) // the run is over: its facts are read regardless
	state, err := docker.InspectState(afterCtx, id)
	if err != nil {
		return WorkerExited{ContainerID: id, ExitCode: result.ExitCode, Stderr: result.Stderr, Err: err}
	}
	exited := WorkerExited{ContainerID: id, ExitCode: result.ExitCode, Stderr: result.Stderr, State: state}
	if result.ExitCode != 0 && storageFull != nil {
		exited.StorageFull = storageFull(afterCtx)
	}
	return exited
}

func createWorker(ctx context.Context, docker WorkerDocker, job workerJob) (string, error) {
	id, err := docker.CreateWorker(ctx, job.spec)
	if err != nil {
		return "", failure.Wrap(failure.SandboxCreateFailed, err, "create worker container")
	}
	return id, nil
}

func copyBundle(ctx context.Context, docker WorkerDocker, job workerJob, id string) error {
	f, err := os.Open(job.bundlePath)
	if err != nil {
		return failure.Wrap(failure.SandboxInputFailed, err, "open input bundle")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return failure.Wrap(failure.SandboxInputFailed, err, "stat input bundle")
	}
	user := job.spec.User.OrImage() // the worker reads it as its own
	if err := docker.CopyFileInto(ctx, id, "/control/input", "repo.bundle", f, info.Size(), user.UID, user.GID, 0o400); err != nil {
		return failure.Wrap(failure.SandboxCreateFailed, err, "copy input bundle into the worker")
	}
	return nil
}
