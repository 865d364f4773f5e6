package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// The attempt's services: after the network and volumes exist, the
// attempt writes fresh credentials into the secrets volume, spawns one
// service actor per declared service (they start together) and starts the
// worker only once every service answered its readiness probe. The total
// cap runs on the attempt's clock from the spawn to the last ready.

// serviceRun is one service's state as the attempt knows it.
type serviceRun struct {
	pid         *actor.PID
	containerID string
	ready       bool
	done        bool // failed or cancelled: its actor stops once its calls returned
}

// secretsDone is the network step's result: the attempt network (and the
// egress network with public_allowlist) and the services' credentials.
type secretsDone struct {
	network         dockerops.IsolatedNetwork
	egressNetworkID string
	err             error
}

// servicesTimedOut is the total readiness cap's timer firing.
type servicesTimedOut struct{}

// startServices creates the isolated attempt network the services and the
// worker share (dockerops.CreateIsolatedNetwork: no host address on the
// bridge, internal, IPv6 off, DNS to the container's loopback), generates
// the attempt's service credentials and writes them into the secrets
// volume (0444, root-owned; the worker mounts the volume read-only). The
// passwords live only in this step's closure: the attempt keeps none.
func (a *attemptActor) startServices(ctx actor.Context) {
	files := map[string][]byte{}
	for _, s := range a.contract.Contract.ServiceTypes() {
		def, _ := services.DefinitionFor(s)
		if def.SecretFile == "" {
			continue // the browser has no credentials
		}
		pw, err := services.NewPassword()
		if err != nil {
			a.fail(failure.Wrap(failure.SandboxCreateFailed, err, "service %s credentials", s))
			a.advance(ctx)
			return
		}
		files[def.SecretFile] = []byte(pw)
	}
	docker, name, image, volume, labels, netName := a.deps.Docker, services.SecretsHelperName(a.names.Prefix), a.imageID, a.names.SecretsVolume, a.labels, a.names.Network
	mode, egressNet := a.d.Sandbox.NetworkPolicy.Mode, egressNetworkName(a.names)
	a.step(ctx, "secrets", func(stepCtx context.Context) any {
		var done secretsDone
		var err error
		if mode == messages.NetworkOpenPublic {
			var id string
			id, err = docker.CreateRoutedNetwork(stepCtx, netName, labels, true)
			done.network = dockerops.IsolatedNetwork{ID: id, Name: netName}
		} else {
			done.network, err = docker.CreateIsolatedNetwork(stepCtx, netName, labels)
		}
		if err != nil {
			done.err = err
			return done
		}
		if mode == messages.NetworkPublicAllowlist {
			if done.egressNetworkID, err = docker.CreateRoutedNetwork(stepCtx, egressNet, labels, false); err != nil {
				done.err = err
				return done
			}
		}
		if len(files) > 0 {
			done.err = docker.WriteSecrets(stepCtx, name, image, volume, labels, files)
		}
		return done
	})
}

func (a *attemptActor) onSecretsWritten(ctx actor.Context, msg secretsDone) {
	if msg.network.ID != "" || msg.egressNetworkID != "" {
		a.network, a.networkID, a.egressNetworkID = msg.network.Name, msg.network.ID, msg.egressNetworkID
		a.writeLedger(a.ledgerState)
	}
	if msg.err != nil {
		a.fail(failure.Wrap(failure.SandboxCreateFailed, msg.err, "create the attempt network or write service credentials"))
	}
	if a.failure != nil {
		a.advance(ctx)
		return
	}
	declared := a.contract.Contract.ServiceTypes()
	shared := services.Attempt{
		Prefix: a.names.Prefix, Network: a.network, SecretsVolume: a.names.SecretsVolume,
		Labels: a.labels, SecurityOpts: a.security,
		ServiceMemoryBytes: a.d.Sandbox.RequestedResources.ServiceMemoryLimitBytes, Count: len(declared),
	}
	a.services = map[string]*serviceRun{}
	for _, s := range declared {
		def, _ := services.DefinitionFor(s)
		within := a.cfg.ServiceReadyWithin
		job := serviceJob{
			service: s,
			spec:    def.ContainerSpec(shared, a.serviceImages[s].ImageID),
			probe: dockerops.ProbeSpec{
				Name: services.ProbeName(a.names.Prefix, s), Image: a.imageID, Network: a.network,
				Labels: a.labels, SecretsVolume: a.names.SecretsVolume, SecurityOpts: a.security,
				Cmd:     def.ProbeArgs(messages.WorkerBinaryPath, within.String()),
				Timeout: within,
			},
			readyWithin: within,
		}
		pid := a.children.spawn(ctx, newServiceProps(a.deps.Docker, job), kindService)
		a.services[s] = &serviceRun{pid: pid}
		a.emit(ctx, messages.RunnerEvent("sandbox_service_starting", fmt.Sprintf("Starting service %s.", s), map[string]string{
			"service": s, "image": a.serviceImages[s].ImageID, "container": job.spec.Name, "alias": job.spec.Alias,
		}))
	}
	if a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkPublicAllowlist {
		a.startEgress(ctx)
	}
	if len(a.services) == 0 && a.egress == nil {
		a.startWorker(ctx) // open_public without services: nothing to wait for
		return
	}
	self := ctx.Self()
	system := ctx.ActorSystem()
	a.servicesTimer = a.cfg.Clock.AfterFunc(a.cfg.ServicesReadyWithin, func() { system.Root.Send(self, servicesTimedOut{}) })
}

func (a *attemptActor) onServiceStarted(ctx actor.Context, msg ServiceStarted) {
	run, ok := a.services[msg.Service]
	if !ok {
		return
	}
	run.containerID = msg.ContainerID
	if a.ledgerWritten && !a.tearingDown {
		a.writeLedger(a.ledgerState)
	}
}

func (a *attemptActor) onServiceReady(ctx actor.Context, msg ServiceReady) {
	run, ok := a.services[msg.Service]
	if !ok || a.failure != nil {
		return
	}
	run.ready = true
	a.emit(ctx, messages.RunnerEvent("sandbox_service_ready", fmt.Sprintf("Service %s is ready.", msg.Service), map[string]string{
		"service": msg.Service, "containerId": msg.ContainerID,
	}))
	a.startWorkerWhenReady(ctx)
}

// startWorkerWhenReady starts the worker once every service and the egress
// proxy (when there is one) are ready.
func (a *attemptActor) startWorkerWhenReady(ctx actor.Context) {
	for _, r := range a.services {
		if !r.ready {
			return
		}
	}
	if a.egress != nil && !a.egress.ready {
		return
	}
	if a.servicesTimer != nil {
		a.servicesTimer.Stop()
	}
	if a.worker == nil && a.workerExit == nil {
		a.startWorker(ctx)
	}
}

func (a *attemptActor) onServiceFailed(ctx actor.Context, msg ServiceFailed) {
	if run, ok := a.services[msg.Service]; ok {
		run.done = true
	}
	if a.tearingDown || a.workerExit != nil {
		return // the worker is done with its services
	}
	a.emit(ctx, messages.FailureEvent(string(failureCode(msg.Err)), msg.Err.Error(), map[string]string{"service": msg.Service}))
	a.abort(ctx, msg.Err)
}

func (a *attemptActor) onServicesTimedOut(ctx actor.Context) {
	var pending []string
	for s, r := range a.services {
		if !r.ready {
			pending = append(pending, s)
		}
	}
	if a.failure != nil {
		return
	}
	if len(pending) == 0 {
		if a.egress != nil && !a.egress.ready {
			a.abort(ctx, failure.New(failure.SandboxEgressFailed, "the egress proxy was not ready within the attempt's total cap of %s", a.cfg.ServicesReadyWithin))
		}
		return
	}
	slices.Sort(pending)
	a.abort(ctx, failure.New(failure.SandboxServiceHealthTimeout, "services %s were not ready within the attempt's total cap of %s",
		strings.Join(pending, ", "), a.cfg.ServicesReadyWithin))
}

// cancelServices asks every service actor to stop.
func (a *attemptActor) cancelServices(ctx actor.Context) {
	if a.servicesTimer != nil {
		a.servicesTimer.Stop()
	}
	for _, r := range a.services {
		if !r.done && r.pid != nil {
			r.done = true
			ctx.Send(r.pid, CancelService{})
		}
	}
	a.cancelEgress(ctx)
}

// servicesAlive reports whether a service actor still runs.
func (a *attemptActor) servicesAlive() bool {
	for _, r := range a.services {
		if r.pid != nil {
			return true
		}
	}
	return a.egress != nil && a.egress.pid != nil
}

// onServiceTerminated forgets a stopped service actor; one that stopped
// without reporting (it crashed) fails the attempt.
func (a *attemptActor) onServiceTerminated(ctx actor.Context, who *actor.PID) {
	if a.onEgressTerminated(ctx, who) {
		return
	}
	for s, r := range a.services {
		if r.pid == nil || !who.Equal(r.pid) {
			continue
		}
		r.pid = nil
		if !r.done && !a.tearingDown && a.workerExit == nil {
			a.abort(ctx, failure.New(failure.SandboxRuntimeFailed, "the %s service actor stopped unexpectedly", s))
			return
		}
		a.advance(ctx)
		return
	}
}

// serviceEndpoints are the worker's connection details, in declaration
// order.
func (a *attemptActor) serviceEndpoints() []messages.ServiceEndpoint {
	var out []messages.ServiceEndpoint
	for _, s := range a.contract.Contract.ServiceTypes() {
		def, _ := services.DefinitionFor(s)
		out = append(out, def.Endpoint())
	}
	return out
}

// serviceLedger lists the planned and created service containers.
func (a *attemptActor) serviceLedger() (planned, created []ledger.Resource) {
	if a.contract == nil {
		return nil, nil
	}
	if a.needsNetwork() {
		planned = append(planned, ledger.Resource{Type: ledger.ResourceNetwork, Name: a.names.Network, Role: a.networkRole()})
		if a.networkID != "" {
			created = append(created, ledger.Resource{Type: ledger.ResourceNetwork, Name: a.names.Network, ID: a.networkID, Role: a.networkRole()})
		}
	}
	ep, ec := a.egressLedger()
	planned, created = append(planned, ep...), append(created, ec...)
	for _, s := range a.contract.Contract.ServiceTypes() {
		name := services.ContainerName(a.names.Prefix, s)
		planned = append(planned, ledger.Resource{Type: ledger.ResourceContainer, Name: name, Role: "service:" + s})
		if r, ok := a.services[s]; ok && r.containerID != "" {
			created = append(created, ledger.Resource{Type: ledger.ResourceContainer, Name: name, ID: r.containerID, Role: "service:" + s})
		}
	}
	return planned, created
}
