package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/messages"
)

// The kinds of sidecar actor: a service, or the egress proxy.
const (
	kindService = "service"
	kindEgress  = "egress"
)

// SidecarStarted tells the attempt a sidecar container exists (for its
// ledger). Role names the sidecar ("service:<name>", egress_proxy).
type SidecarStarted struct {
	Role, ContainerID string
}

// SidecarReady tells the attempt a sidecar answered its readiness probe.
type SidecarReady struct {
	Role, ContainerID string
}

// SidecarFailed tells the attempt a sidecar could not be started, did not
// become ready, or stopped. Err carries the sidecar's code (for a service
// sandbox_create_failed, sandbox_service_health_timeout or
// sandbox_service_failed; for the egress proxy sandbox_egress_failed; for a
// crashed call sandbox_runtime_failed) and names the sidecar.
type SidecarFailed struct {
	Role string
	Err  error
}

// CancelSidecar asks a sidecar actor to stop what it runs; it stops itself
// once every call it started has returned (its container is left to the
// attempt's teardown).
type CancelSidecar struct{}

// sidecarJob is everything a sidecar actor needs: what it runs, how it is
// probed, how its failures are named and coded, and what it reports.
type sidecarJob struct {
	kind string // its actor kind: kindService, kindEgress
	role string // its role in the ledger, the sampler and its reports
	// what names it in create and crash failures ("service postgres",
	// "egress proxy"); subject in probe and exit failures ("service
	// postgres", "the egress proxy").
	what, subject string
	container     dockerops.Sidecar
	probe         dockerops.ProbeSpec
	// readyWithin is the probe's own cap.
	readyWithin time.Duration
	// The codes of a failed create, a failed probe and a stopped container.
	createCode, healthCode, stoppedCode failure.Code
	// accessLog: the container's stdout is the egress proxy's access log,
	// reported as bounded EgressAccess events; a cancelled sidecar is then
	// stopped (within stopGrace) so that its log ends with its last lines.
	accessLog bool
	stopGrace time.Duration
	// facts are its inspect facts that never change.
	facts map[string]string
	// adoptID is set for a sidecar of a re-adopted attempt: the container
	// a previous forged process started, found and watched again instead
	// of created (see reattach).
	adoptID string
	// skipReports (accessLog, adoptID) is how many access records the
	// previous processes delivered: the log is followed again from its
	// start, its lines counted again, and those records not reported
	// again.
	skipReports int
}

// Internal results of the sidecar actor's calls.
type (
	sidecarCreated struct {
		id  string
		err error
	}
	sidecarStopped struct {
		state dockerops.ContainerState
		err   error
	}
	sidecarProbed struct {
		exitCode int
		stderr   string
		err      error
	}
	sidecarFound struct {
		state dockerops.ContainerState
		err   error
	}
	sidecarStopDone struct{ err error }
	sidecarLogLine  struct{ line []byte }
	sidecarLogEnded struct {
		skipped int
		err     error
	}
)

// sidecarActor runs one sidecar container beside the worker: create and
// start it, watch it, probe it from the attempt network until it is ready,
// and (the egress proxy) turn its access log into bounded reports. It is
// never restarted: a restarted database has lost the task's data. It
// reports to its parent (the attempt) with SidecarStarted, SidecarReady,
// at most one SidecarFailed, and the log's EgressAccess and
// EgressLogSummary.
type sidecarActor struct {
	docker SidecarDocker
	job    sidecarJob

	runCtx context.Context
	cancel context.CancelFunc
	// logCtx bounds the access log follower: it outlives runCtx so that
	// the lines of the last requests are read once the sidecar is stopped.
	logCtx      context.Context
	logCancel   context.CancelFunc
	phase       string // creating, probing, ready, failed, stopped, cancelling
	health      string // starting, healthy, unhealthy, exited
	containerID string
	inflight    int  // calls started and not yet returned
	reported    bool // a SidecarFailed was sent
	cancelled   bool
	stopping    bool // its container is being stopped (accessLog)
	log         accessLog
	records     int // access records read (reported or not): skipReports
}

func newSidecarProps(docker SidecarDocker, job sidecarJob) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &sidecarActor{docker: docker, job: job} })
}

func (s *sidecarActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.runCtx, s.cancel = context.WithCancel(context.Background())
		s.logCtx, s.logCancel = context.WithCancel(context.Background())
		s.phase, s.health = "creating", "starting"
		if s.job.adoptID != "" {
			s.reattach(ctx)
			break
		}
		docker, spec := s.docker, s.job.container
		s.call(ctx, "create", func(c context.Context) any {
			id, err := docker.CreateSidecar(c, spec)
			return sidecarCreated{id: id, err: err}
		})
	case sidecarCreated:
		s.inflight--
		s.onCreated(ctx, msg)
	case sidecarFound:
		s.inflight--
		s.onFound(ctx, msg)
	case sidecarProbed:
		s.inflight--
		s.onProbed(ctx, msg)
	case sidecarStopped:
		s.inflight--
		s.onStopped(ctx, msg)
	case sidecarLogLine:
		if a, ok := s.log.record(msg.line); ok {
			if s.records++; s.records > s.job.skipReports {
				ctx.Send(ctx.Parent(), EgressAccess{Access: a})
			}
		}
	case sidecarLogEnded:
		s.inflight--
		s.log.unparsed += msg.skipped
		ctx.Send(ctx.Parent(), s.log.summary())
	case asyncPanic:
		s.inflight--
		s.failWith(ctx, failure.New(failure.SandboxRuntimeFailed, "%s: %s", s.job.what, msg.Error()))
	case CancelSidecar:
		s.onCancel(ctx)
	case sidecarStopDone:
		s.inflight--
		if msg.err != nil {
			s.logCancel() // the log may never end by itself
		}
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
			s.logCancel()
		}
	case messages.Inspect:
		facts := maps.Clone(s.job.facts)
		facts["containerId"], facts["health"] = s.containerID, s.health
		if s.job.accessLog {
			s.log.addFacts(facts)
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: s.job.kind, Phase: s.phase, Facts: facts})
	}
	s.maybeStop(ctx)
}

// call runs work off the mailbox on the actor's run context, counting it;
// callOn runs it on runCtx.
func (s *sidecarActor) call(ctx actor.Context, step string, work func(context.Context) any) {
	s.callOn(ctx, s.runCtx, step, work)
}

func (s *sidecarActor) callOn(ctx actor.Context, runCtx context.Context, step string, work func(context.Context) any) {
	s.inflight++
	runAsync(ctx, runCtx, s.job.kind+" "+step, work)
}

// maybeStop stops the actor once it was cancelled (or has failed) and no
// call is in flight: the attempt's teardown never races a create.
func (s *sidecarActor) maybeStop(ctx actor.Context) {
	if s.inflight == 0 && (s.cancelled || s.reported) {
		if s.phase != "failed" {
			s.phase = "stopped"
		}
		ctx.Stop(ctx.Self())
	}
}

func (s *sidecarActor) onCreated(ctx actor.Context, msg sidecarCreated) {
	s.containerID = msg.id
	if msg.id != "" {
		ctx.Send(ctx.Parent(), SidecarStarted{Role: s.job.role, ContainerID: msg.id})
	}
	if msg.err != nil {
		s.failWith(ctx, failure.Wrap(s.job.createCode, msg.err, "%s", s.job.what))
		return
	}
	if s.cancelled {
		return
	}
	s.watch(ctx, msg.id)
}

// watch watches the running container id, runs its readiness probe and
// (the egress proxy) follows its access log.
func (s *sidecarActor) watch(ctx actor.Context, id string) {
	s.phase = "probing"
	docker, probe := s.docker, s.job.probe
	s.call(ctx, "watch", func(c context.Context) any {
		state, err := docker.WaitStopped(c, id)
		return sidecarStopped{state: state, err: err}
	})
	s.call(ctx, "probe", func(c context.Context) any {
		// dockerops bounds the probe run (its cap plus a margin).
		code, stderr, err := docker.RunProbe(c, probe)
		return sidecarProbed{exitCode: code, stderr: stderr, err: err}
	})
	if !s.job.accessLog {
		return
	}
	// The access log: each line goes to the mailbox as it comes; the
	// follower ends when the container stops or the actor is cancelled.
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.callOn(ctx, s.logCtx, "log", func(c context.Context) any {
		skipped, err := docker.FollowLogLines(c, id, egress.MaxLogLine, func(line []byte) {
			root.Send(self, sidecarLogLine{line: line})
		})
		return sidecarLogEnded{skipped: skipped, err: err}
	})
}

// Re-adoption (readopt.go): a sidecar of an attempt a previous forged
// process left running is found by the container id its ledger recorded
// and must still run; it is then probed again with the probe it passed at
// start, and watched as at start. A container gone or stopped while no
// forged ran fails the attempt with the sidecar's stopped code (a
// service: sandbox_service_failed), a failed probe with its health code,
// as they would at start; the message says it was found on re-adoption.

// reattach inspects the container a previous process started.
func (s *sidecarActor) reattach(ctx actor.Context) {
	s.phase = "reattaching"
	docker, id := s.docker, s.job.adoptID
	s.call(ctx, "reattach", func(c context.Context) any {
		state, err := docker.InspectState(c, id)
		return sidecarFound{state: state, err: err}
	})
}

func (s *sidecarActor) onFound(ctx actor.Context, msg sidecarFound) {
	s.containerID = s.job.adoptID
	if s.cancelled {
		return
	}
	switch {
	case msg.err != nil && dockerops.IsNotFound(msg.err):
		s.health = "exited"
		s.failWith(ctx, failure.New(s.job.stoppedCode, "%s was removed while forged was away; found missing when forged re-adopted the attempt", s.job.subject))
		return
	case msg.err != nil:
		s.failWith(ctx, failure.Wrap(failure.SandboxRuntimeFailed, msg.err, "%s: inspect its container on re-adoption", s.job.what))
		return
	case !msg.state.Running:
		s.health = "exited"
		how := fmt.Sprintf("exited with code %d", msg.state.ExitCode)
		if msg.state.OOMKilled {
			how = "was killed for exceeding its memory limit"
		}
		s.failWith(ctx, failure.New(s.job.stoppedCode, "%s %s while forged was away; found stopped when forged re-adopted the attempt", s.job.subject, how))
		return
	}
	s.watch(ctx, s.job.adoptID)
}

func (s *sidecarActor) onProbed(ctx actor.Context, msg sidecarProbed) {
	if s.cancelled || s.reported || s.phase != "probing" {
		return
	}
	if msg.err == nil && msg.exitCode == 0 {
		s.phase, s.health = "ready", "healthy"
		ctx.Send(ctx.Parent(), SidecarReady{Role: s.job.role, ContainerID: s.containerID})
		return
	}
	s.health = "unhealthy"
	detail := text.OneLine(msg.stderr, 300)
	if msg.err != nil {
		detail = text.OneLine(msg.err.Error()+" "+detail, 300)
	}
	again := ""
	if s.job.adoptID != "" {
		again = " again on re-adoption"
	}
	s.failWith(ctx, failure.New(s.job.healthCode,
		"%s did not pass its readiness probe%s within %s: %s", s.job.subject, again, s.job.readyWithin, detail))
}

func (s *sidecarActor) onStopped(ctx actor.Context, msg sidecarStopped) {
	if s.cancelled || s.reported {
		return
	}
	if msg.err != nil && errors.Is(msg.err, context.Canceled) {
		return
	}
	s.health = "exited"
	when := "while the worker ran"
	if s.phase != "ready" {
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
	s.failWith(ctx, failure.New(s.job.stoppedCode, "%s %s %s", s.job.subject, how, when))
}

// onCancel cancels everything the actor runs. A sidecar whose access log
// is followed is stopped first, so that its log ends with the lines of the
// last requests (squid writes a request's line when it ends): the follower
// then returns at the end of the stream.
func (s *sidecarActor) onCancel(ctx actor.Context) {
	if s.cancelled {
		return
	}
	s.cancelled = true
	if s.phase != "failed" {
		s.phase = "cancelling"
	}
	s.cancel()
	if !s.job.accessLog || s.containerID == "" || s.stopping {
		s.logCancel()
		return
	}
	s.stopping = true
	docker, id, grace := s.docker, s.containerID, s.job.stopGrace
	s.callOn(ctx, context.Background(), "stop", func(c context.Context) any {
		return sidecarStopDone{err: docker.StopContainer(c, id, grace)}
	})
}

// failWith reports the sidecar's first failure and cancels what still
// runs.
func (s *sidecarActor) failWith(ctx actor.Context, err error) {
	if s.reported {
		return
	}
	s.reported = true
	s.phase = "failed"
	s.cancel()
	s.logCancel()
	ctx.Send(ctx.Parent(), SidecarFailed{Role: s.job.role, Err: err})
}

// maxEgressEvents bounds the access records an attempt reports; later
// ones are counted (EgressLogSummary).
const maxEgressEvents = 500

// EgressAccess is one request the egress proxy logged.
type EgressAccess struct{ Access egress.Access }

// EgressLogSummary is sent once the proxy's log ends: how many records
// were reported, dropped over the bound, or unreadable.
type EgressLogSummary struct{ Reported, Dropped, Unparsed int }

// accessLog counts the egress proxy's access log.
type accessLog struct {
	allowed, denied, failed, dropped, unparsed int
}

// record parses one access log line strictly and returns the record to
// report, within the bound. squid's own diagnostics share the stream (on
// stderr, which the follower discards); a stdout line that is not a record
// is counted.
func (l *accessLog) record(line []byte) (egress.Access, bool) {
	a, err := egress.ParseLine(line)
	if err != nil {
		l.unparsed++
		return egress.Access{}, false
	}
	switch a.Decision {
	case egress.Allowed:
		l.allowed++
	case egress.Denied:
		l.denied++
	default:
		l.failed++
	}
	if l.allowed+l.denied+l.failed > maxEgressEvents {
		l.dropped++
		return egress.Access{}, false
	}
	return a, true
}

func (l *accessLog) summary() EgressLogSummary {
	reported := min(l.allowed+l.denied+l.failed, maxEgressEvents)
	return EgressLogSummary{Reported: reported, Dropped: l.dropped, Unparsed: l.unparsed}
}

func (l *accessLog) addFacts(facts map[string]string) {
	facts["allowed"], facts["denied"], facts["failed"] = strconv.Itoa(l.allowed), strconv.Itoa(l.denied), strconv.Itoa(l.failed)
	facts["dropped"], facts["unparsed"] = strconv.Itoa(l.dropped), strconv.Itoa(l.unparsed)
}
