package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/messages"
)

// The attempt's sidecars: its services (attempt_services.go) and the egress
// proxy (attempt_egress.go), each run by a sidecar actor (sidecar.go). They
// start together once the attempt network exists; the worker starts only
// once every one of them answered its readiness probe. The total cap runs
// on the attempt's clock from the spawn to the last ready. A sidecar's
// failure before the worker exits fails the attempt with its code.

// sidecarSet is the attempt's part for its networks and sidecars.
type sidecarSet struct {
	// serviceImages are the declared services' verified catalogue
	// entries; egressImage is the verified egress proxy image
	// (public_allowlist).
	serviceImages map[string]services.Entry
	egressImage   services.Entry
	// network is the attempt network's name, when services or the network
	// policy need one; networkID its id; egressNetworkID the egress
	// network's id.
	network, networkID, egressNetworkID string
	// guard are the host facts of the netns guards; holderID the guarded
	// netns holder of an open_public worker.
	guard    egress.GuardFacts
	holderID string
	// openRules are the open_public guard's rules, for the services on
	// the open network.
	openRules string
	// runs are the sidecars, by role.
	runs  map[string]*sidecarRun
	timer clock.Timer // the total readiness cap
}

// sidecarRun is one sidecar's state as the attempt knows it.
type sidecarRun struct {
	pid         *actor.PID
	service     string // the service it runs; "" for the egress proxy
	containerID string
	ready       bool
	done        bool // failed or cancelled: its actor stops once its calls returned
}

// name is how the attempt names the sidecar's actor.
func (r *sidecarRun) name() string {
	if r.service == "" {
		return "egress proxy"
	}
	return r.service + " service"
}

// containerID is the container of the sidecar of role, "" until created.
func (s *sidecarSet) containerID(role string) string {
	if r, ok := s.runs[role]; ok {
		return r.containerID
	}
	return ""
}

// allReady reports whether every sidecar answered its probe.
func (s *sidecarSet) allReady() bool {
	for _, r := range s.runs {
		if !r.ready {
			return false
		}
	}
	return true
}

// alive reports whether a sidecar actor still runs.
func (s *sidecarSet) alive() bool {
	for _, r := range s.runs {
		if r.pid != nil {
			return true
		}
	}
	return false
}

// stopTimer stops the total readiness cap.
func (s *sidecarSet) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// servicesTimedOut is the total readiness cap's timer firing.
type servicesTimedOut struct{}

// spawnSidecar starts the sidecar actor of job (service: the service it
// runs, "" for the egress proxy).
func (a *attemptActor) spawnSidecar(ctx actor.Context, job sidecarJob, service string) {
	if a.sidecars.runs == nil {
		a.sidecars.runs = map[string]*sidecarRun{}
	}
	pid := a.children.spawn(ctx, newSidecarProps(a.deps.Docker, job), job.kind)
	a.sidecars.runs[job.role] = &sidecarRun{pid: pid, service: service}
}

func (a *attemptActor) onSidecarStarted(msg SidecarStarted) {
	run, ok := a.sidecars.runs[msg.Role]
	if !ok {
		return
	}
	run.containerID = msg.ContainerID
	if a.ledger.written && !a.tearingDown {
		a.writeLedger(a.ledger.state)
	}
}

func (a *attemptActor) onSidecarReady(ctx actor.Context, msg SidecarReady) {
	run, ok := a.sidecars.runs[msg.Role]
	if !ok || a.verdict.failure != nil {
		return
	}
	run.ready = true
	if run.service == "" {
		a.emit(ctx, messages.RunnerEvent("sandbox_egress_ready", "The egress proxy is ready.", map[string]string{"containerId": msg.ContainerID}))
	} else {
		a.emit(ctx, messages.RunnerEvent("sandbox_service_ready", fmt.Sprintf("Service %s is ready.", run.service), map[string]string{
			"service": run.service, "containerId": msg.ContainerID,
		}))
	}
	a.startWorkerWhenReady(ctx)
}

// startWorkerWhenReady starts the worker once every sidecar is ready.
func (a *attemptActor) startWorkerWhenReady(ctx actor.Context) {
	if !a.sidecars.allReady() {
		return
	}
	a.sidecars.stopTimer()
	if a.worker.pid == nil && a.worker.exit == nil {
		a.startWorker(ctx)
	}
}

func (a *attemptActor) onSidecarFailed(ctx actor.Context, msg SidecarFailed) {
	var data any // the proxy's failure names no service
	if run, ok := a.sidecars.runs[msg.Role]; ok {
		run.done = true
		if run.service != "" {
			data = map[string]string{"service": run.service}
		}
	}
	if a.tearingDown || a.worker.exit != nil {
		return // the worker is done with its sidecars
	}
	a.emit(ctx, messages.FailureEvent(string(failureCode(msg.Err)), msg.Err.Error(), data))
	a.abort(ctx, msg.Err)
}

func (a *attemptActor) onServicesTimedOut(ctx actor.Context) {
	var pending []string
	proxyPending := false
	for _, r := range a.sidecars.runs {
		switch {
		case r.ready:
		case r.service == "":
			proxyPending = true
		default:
			pending = append(pending, r.service)
		}
	}
	if a.verdict.failure != nil {
		return
	}
	if len(pending) == 0 {
		if proxyPending {
			a.abort(ctx, failure.New(failure.SandboxEgressFailed, "the egress proxy was not ready within the attempt's total cap of %s", a.cfg.ServicesReadyWithin))
		}
		return
	}
	slices.Sort(pending)
	a.abort(ctx, failure.New(failure.SandboxServiceHealthTimeout, "services %s were not ready within the attempt's total cap of %s",
		strings.Join(pending, ", "), a.cfg.ServicesReadyWithin))
}

// cancelSidecars asks every sidecar actor to stop.
func (a *attemptActor) cancelSidecars(ctx actor.Context) {
	a.sidecars.stopTimer()
	for _, r := range a.sidecars.runs {
		if !r.done && r.pid != nil {
			r.done = true
			ctx.Send(r.pid, CancelSidecar{})
		}
	}
}

// onSidecarTerminated forgets a stopped sidecar actor; one that stopped
// without reporting (it crashed) fails the attempt.
func (a *attemptActor) onSidecarTerminated(ctx actor.Context, who *actor.PID) {
	for _, r := range a.sidecars.runs {
		if r.pid == nil || !who.Equal(r.pid) {
			continue
		}
		r.pid = nil
		if !r.done && !a.tearingDown && a.worker.exit == nil {
			a.abort(ctx, failure.New(failure.SandboxRuntimeFailed, "the %s actor stopped unexpectedly", r.name()))
			return
		}
		a.advance(ctx)
		return
	}
}
