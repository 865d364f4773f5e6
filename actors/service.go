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
	"github.com/forgedev/forged/messages"
)

const kindService = "service"

// ServiceStarted tells the attempt a service container exists (for its
// ledger).
type ServiceStarted struct {
	Service, ContainerID string
}

// ServiceReady tells the attempt a service answered its readiness probe.
type ServiceReady struct {
	Service, ContainerID string
}

// ServiceFailed tells the attempt a service could not be started, did not
// become ready, or stopped. Err carries the code (sandbox_create_failed,
// sandbox_service_health_timeout or sandbox_service_failed) and names the
// service.
type ServiceFailed struct {
	Service string
	Err     error
}

// CancelService asks a service actor to stop what it runs; it stops itself
// once every call it started has returned (its container is left to the
// attempt's teardown).
type CancelService struct{}

// serviceJob is everything a service actor needs.
type serviceJob struct {
	service string
	spec    dockerops.ServiceSpec
	probe   dockerops.ProbeSpec
	// readyWithin is the probe's own cap (per service).
	readyWithin time.Duration
}

// Internal results of the service actor's calls.
type (
	serviceCreated struct {
		id  string
		err error
	}
	serviceStopped struct {
		state dockerops.ContainerState
		err   error
	}
	serviceProbed struct {
		exitCode int
		stderr   string
		err      error
	}
)

// serviceActor runs one service container beside the worker: create and
// start it, watch it, and probe it from the attempt network until it is
// ready. It is never restarted: a restarted database has lost the task's
// data. It reports to its parent (the attempt) with ServiceStarted,
// ServiceReady and at most one ServiceFailed.
type serviceActor struct {
	docker ServiceDocker
	job    serviceJob

	runCtx      context.Context
	cancel      context.CancelFunc
	phase       string // creating, probing, ready, failed, stopped, cancelling
	health      string // starting, healthy, unhealthy, exited
	containerID string
	inflight    int  // calls started and not yet returned
	reported    bool // a ServiceFailed was sent
	cancelled   bool
}

func newServiceProps(docker ServiceDocker, job serviceJob) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &serviceActor{docker: docker, job: job} })
}

func (s *serviceActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.runCtx, s.cancel = context.WithCancel(context.Background())
		s.phase, s.health = "creating", "starting"
		docker, spec := s.docker, s.job.spec
		s.call(ctx, "service create", func(c context.Context) any {
			id, err := docker.CreateService(c, spec)
			return serviceCreated{id: id, err: err}
		})
	case serviceCreated:
		s.inflight--
		s.onCreated(ctx, msg)
	case serviceProbed:
		s.inflight--
		s.onProbed(ctx, msg)
	case serviceStopped:
		s.inflight--
		s.onStopped(ctx, msg)
	case asyncPanic:
		s.inflight--
		s.failWith(ctx, failure.New(failure.SandboxRuntimeFailed, "service %s: %s", s.job.service, msg.Error()))
	case CancelService:
		s.cancelled = true
		if s.phase != "failed" {
			s.phase = "cancelling"
		}
		s.cancel()
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	case messages.Inspect:
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindService, Phase: s.phase, Facts: map[string]string{
			"service": s.job.service, "container": s.job.spec.Name, "containerId": s.containerID,
			"image": s.job.spec.Image, "alias": s.job.spec.Alias, "health": s.health,
			"memoryBytes": strconv.FormatInt(s.job.spec.MemoryBytes, 10),
		}})
	}
	s.maybeStop(ctx)
}

// call runs work off the mailbox on the actor's run context, counting it.
func (s *serviceActor) call(ctx actor.Context, step string, work func(context.Context) any) {
	s.inflight++
	runAsync(ctx, s.runCtx, step, work)
}

// maybeStop stops the actor once it was cancelled (or has failed) and no
// call is in flight: the attempt's teardown never races a create.
func (s *serviceActor) maybeStop(ctx actor.Context) {
	if s.inflight == 0 && (s.cancelled || s.reported) {
		if s.phase != "failed" {
			s.phase = "stopped"
		}
		ctx.Stop(ctx.Self())
	}
}

func (s *serviceActor) onCreated(ctx actor.Context, msg serviceCreated) {
	s.containerID = msg.id
	if msg.id != "" {
		ctx.Send(ctx.Parent(), ServiceStarted{Service: s.job.service, ContainerID: msg.id})
	}
	if msg.err != nil {
		s.failWith(ctx, failure.Wrap(failure.SandboxCreateFailed, msg.err, "service %s", s.job.service))
		return
	}
	if s.cancelled {
		return
	}
	s.phase = "probing"
	docker, id, probe := s.docker, msg.id, s.job.probe
	s.call(ctx, "service watch", func(c context.Context) any {
		state, err := docker.WaitStopped(c, id)
		return serviceStopped{state: state, err: err}
	})
	s.call(ctx, "service probe", func(c context.Context) any {
		// dockerops bounds the probe run (its cap plus a margin).
		code, stderr, err := docker.RunProbe(c, probe)
		return serviceProbed{exitCode: code, stderr: stderr, err: err}
	})
}

func (s *serviceActor) onProbed(ctx actor.Context, msg serviceProbed) {
	if s.cancelled || s.reported || s.phase != "probing" {
		return
	}
	if msg.err == nil && msg.exitCode == 0 {
		s.phase, s.health = "ready", "healthy"
		ctx.Send(ctx.Parent(), ServiceReady{Service: s.job.service, ContainerID: s.containerID})
		return
	}
	s.health = "unhealthy"
	detail := text.OneLine(msg.stderr, 300)
	if msg.err != nil {
		detail = text.OneLine(msg.err.Error()+" "+detail, 300)
	}
	s.failWith(ctx, failure.New(failure.SandboxServiceHealthTimeout,
		"service %s did not pass its readiness probe within %s: %s", s.job.service, s.job.readyWithin, detail))
}

func (s *serviceActor) onStopped(ctx actor.Context, msg serviceStopped) {
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
	s.failWith(ctx, failure.New(failure.SandboxServiceFailed, "service %s %s %s", s.job.service, how, when))
}

// failWith reports the service's first failure and cancels what still runs.
func (s *serviceActor) failWith(ctx actor.Context, err error) {
	if s.reported {
		return
	}
	s.reported = true
	s.phase = "failed"
	s.cancel()
	ctx.Send(ctx.Parent(), ServiceFailed{Service: s.job.service, Err: err})
}
