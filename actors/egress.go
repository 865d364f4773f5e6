package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/messages"
)

const kindEgress = "egress"

// maxEgressEvents bounds the access records an attempt reports; later
// ones are counted (EgressLogSummary).
const maxEgressEvents = 500

// egressStopGrace is squid's time to close before SIGKILL (its own
// shutdown_lifetime is 1 s).
const egressStopGrace = 3 * time.Second

// EgressStarted tells the attempt the proxy container exists.
type EgressStarted struct{ ContainerID string }

// EgressReady tells the attempt the proxy answered its readiness probe.
type EgressReady struct{ ContainerID string }

// EgressFailed tells the attempt the proxy could not be started, did not
// become ready, or stopped. Err carries sandbox_egress_failed (or
// sandbox_runtime_failed for a crashed call).
type EgressFailed struct{ Err error }

// EgressAccess is one request the proxy logged.
type EgressAccess struct{ Access egress.Access }

// EgressLogSummary is sent once the proxy's log ends: how many records
// were reported, dropped over the bound, or unreadable.
type EgressLogSummary struct{ Reported, Dropped, Unparsed int }

// CancelEgress asks the proxy actor to stop what it runs; it stops itself
// once every call it started has returned (the container is left to the
// attempt's teardown).
type CancelEgress struct{}

// egressJob is everything the proxy actor needs.
type egressJob struct {
	spec        dockerops.EgressSpec
	probe       dockerops.ProbeSpec
	readyWithin time.Duration
}

// Internal results of the proxy actor's calls.
type (
	egressCreated struct {
		id  string
		err error
	}
	egressStopped struct {
		state dockerops.ContainerState
		err   error
	}
	egressProbed struct {
		exitCode int
		stderr   string
		err      error
	}
	egressLogLine  struct{ line []byte }
	egressStopDone struct{ err error }
	egressLogEnded struct {
		skipped int
		err     error
	}
)

// egressActor runs the egress proxy beside the worker: create and start
// it, watch it, probe it from the attempt network until it is ready, and
// turn its access log into bounded EgressAccess reports. It is never
// restarted. It reports to its parent (the attempt) with EgressStarted,
// EgressReady, EgressAccess, EgressLogSummary and at most one EgressFailed.
type egressActor struct {
	docker EgressDocker
	job    egressJob

	runCtx context.Context
	cancel context.CancelFunc
	// logCtx bounds the access log follower: it outlives runCtx so that
	// the lines of the last requests are read once the proxy is stopped.
	logCtx      context.Context
	logCancel   context.CancelFunc
	stopping    bool
	phase       string // creating, probing, ready, failed, stopped, cancelling
	health      string // starting, healthy, unhealthy, exited
	containerID string
	inflight    int
	reported    bool
	cancelled   bool
	// The access log's counts.
	allowed, denied, failedReqs, dropped, unparsed int
}

func newEgressProps(docker EgressDocker, job egressJob) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &egressActor{docker: docker, job: job} })
}

func (e *egressActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		e.runCtx, e.cancel = context.WithCancel(context.Background())
		e.logCtx, e.logCancel = context.WithCancel(context.Background())
		e.phase, e.health = "creating", "starting"
		docker, spec := e.docker, e.job.spec
		e.call(ctx, "egress create", func(c context.Context) any {
			id, err := docker.CreateEgressProxy(c, spec)
			return egressCreated{id: id, err: err}
		})
	case egressCreated:
		e.inflight--
		e.onCreated(ctx, msg)
	case egressProbed:
		e.inflight--
		e.onProbed(ctx, msg)
	case egressStopped:
		e.inflight--
		e.onStopped(ctx, msg)
	case egressLogLine:
		e.onLogLine(ctx, msg.line)
	case egressLogEnded:
		e.inflight--
		e.unparsed += msg.skipped
		ctx.Send(ctx.Parent(), EgressLogSummary{Reported: e.reportedCount(), Dropped: e.dropped, Unparsed: e.unparsed})
	case asyncPanic:
		e.inflight--
		e.failWith(ctx, failure.New(failure.SandboxRuntimeFailed, "egress proxy: %s", msg.Error()))
	case CancelEgress:
		e.onCancel(ctx)
	case egressStopDone:
		e.inflight--
		if msg.err != nil {
			e.logCancel() // the log may never end by itself
		}
	case *actor.Stopping:
		if e.cancel != nil {
			e.cancel()
			e.logCancel()
		}
	case messages.Inspect:
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindEgress, Phase: e.phase, Facts: map[string]string{
			"container": e.job.spec.Name, "containerId": e.containerID, "image": e.job.spec.Image,
			"alias": e.job.spec.Alias, "health": e.health, "egressNetwork": e.job.spec.EgressNetwork,
			"memoryBytes": strconv.FormatInt(e.job.spec.MemoryBytes, 10),
			"allowed":     strconv.Itoa(e.allowed), "denied": strconv.Itoa(e.denied), "failed": strconv.Itoa(e.failedReqs),
			"dropped": strconv.Itoa(e.dropped), "unparsed": strconv.Itoa(e.unparsed),
		}})
	}
	e.maybeStop(ctx)
}

func (e *egressActor) reportedCount() int {
	return min(e.allowed+e.denied+e.failedReqs, maxEgressEvents)
}

func (e *egressActor) call(ctx actor.Context, step string, work func(context.Context) any) {
	e.inflight++
	runAsync(ctx, e.runCtx, step, work)
}

// maybeStop stops the actor once it was cancelled (or has failed) and no
// call is in flight: the attempt's teardown never races a create.
func (e *egressActor) maybeStop(ctx actor.Context) {
	if e.inflight == 0 && (e.cancelled || e.reported) {
		if e.phase != "failed" {
			e.phase = "stopped"
		}
		ctx.Stop(ctx.Self())
	}
}

func (e *egressActor) onCreated(ctx actor.Context, msg egressCreated) {
	e.containerID = msg.id
	if msg.id != "" {
		ctx.Send(ctx.Parent(), EgressStarted{ContainerID: msg.id})
	}
	if msg.err != nil {
		e.failWith(ctx, failure.Wrap(failure.SandboxEgressFailed, msg.err, "egress proxy"))
		return
	}
	if e.cancelled {
		return
	}
	e.phase = "probing"
	docker, id, probe := e.docker, msg.id, e.job.probe
	e.call(ctx, "egress watch", func(c context.Context) any {
		state, err := docker.WaitStopped(c, id)
		return egressStopped{state: state, err: err}
	})
	e.call(ctx, "egress probe", func(c context.Context) any {
		code, stderr, err := docker.RunProbe(c, probe)
		return egressProbed{exitCode: code, stderr: stderr, err: err}
	})
	// The access log: each line goes to the mailbox as it comes; the
	// follower ends when the container stops or the actor is cancelled.
	self, root := ctx.Self(), ctx.ActorSystem().Root
	e.inflight++
	runAsync(ctx, e.logCtx, "egress log", func(c context.Context) any {
		skipped, err := docker.FollowLogLines(c, id, egress.MaxLogLine, func(line []byte) {
			root.Send(self, egressLogLine{line: line})
		})
		return egressLogEnded{skipped: skipped, err: err}
	})
}

// onLogLine parses one access log line strictly and reports it, within
// the bound. squid's own diagnostics share the stream (on stderr, which
// the follower discards); a stdout line that is not a record is counted.
func (e *egressActor) onLogLine(ctx actor.Context, line []byte) {
	a, err := egress.ParseLine(line)
	if err != nil {
		e.unparsed++
		return
	}
	switch a.Decision {
	case egress.Allowed:
		e.allowed++
	case egress.Denied:
		e.denied++
	default:
		e.failedReqs++
	}
	if e.allowed+e.denied+e.failedReqs > maxEgressEvents {
		e.dropped++
		return
	}
	ctx.Send(ctx.Parent(), EgressAccess{Access: a})
}

func (e *egressActor) onProbed(ctx actor.Context, msg egressProbed) {
	if e.cancelled || e.reported || e.phase != "probing" {
		return
	}
	if msg.err == nil && msg.exitCode == 0 {
		e.phase, e.health = "ready", "healthy"
		ctx.Send(ctx.Parent(), EgressReady{ContainerID: e.containerID})
		return
	}
	e.health = "unhealthy"
	detail := text.OneLine(msg.stderr, 300)
	if msg.err != nil {
		detail = text.OneLine(msg.err.Error()+" "+detail, 300)
	}
	e.failWith(ctx, failure.New(failure.SandboxEgressFailed, "the egress proxy did not pass its readiness probe within %s: %s", e.job.readyWithin, detail))
}

func (e *egressActor) onStopped(ctx actor.Context, msg egressStopped) {
	if e.cancelled || e.reported {
		return
	}
	if msg.err != nil && errors.Is(msg.err, context.Canceled) {
		return
	}
	e.health = "exited"
	when := "while the worker ran"
	if e.phase != "ready" {
		when = "before it was ready"
	}
	how := fmt.Sprintf("exited with code %d", msg.state.ExitCode)
	switch {
	case msg.err != nil:
		how = "could no longer be watched: " + text.OneLine(msg.err.Error(), 200)
	case msg.state.Status == "removed":
		how = "was removed"
	case msg.state.OOMKilled:
		how = "was killed for exceeding its memory limit"
	}
	e.failWith(ctx, failure.New(failure.SandboxEgressFailed, "the egress proxy %s %s", how, when))
}

// onCancel stops the proxy itself, so that its log ends with the lines of
// the last requests (squid writes a request's line when it ends): the
// follower then returns at the end of the stream. Everything else is
// cancelled at once.
func (e *egressActor) onCancel(ctx actor.Context) {
	if e.cancelled {
		return
	}
	e.cancelled = true
	if e.phase != "failed" {
		e.phase = "cancelling"
	}
	e.cancel()
	if e.containerID == "" || e.stopping {
		e.logCancel()
		return
	}
	e.stopping = true
	docker, id := e.docker, e.containerID
	e.inflight++
	runAsync(ctx, context.Background(), "egress stop", func(c context.Context) any {
		return egressStopDone{err: docker.StopContainer(c, id, egressStopGrace)}
	})
}

func (e *egressActor) failWith(ctx actor.Context, err error) {
	if e.reported {
		return
	}
	e.reported = true
	e.phase = "failed"
	e.cancel()
	e.logCancel()
	ctx.Send(ctx.Parent(), EgressFailed{Err: err})
}
