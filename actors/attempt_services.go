package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// The attempt's services: after the network and volumes exist, the
// attempt writes fresh credentials into the secrets volume and spawns one
// sidecar actor per declared service (they start together, with the
// egress proxy; attempt_sidecars.go).

// secretsDone is the network step's result: the attempt network (and the
// egress network with public_allowlist) and the services' credentials.
type secretsDone struct {
	network         dockerops.IsolatedNetwork
	egressNetworkID string
	// guard are the host facts of the netns guards; holderID the guarded
	// netns holder of an open_public worker (attempt_egress.go).
	guard    egress.GuardFacts
	holderID string
	// openRules are the open_public guard's rules (the worker's holder
	// and the services on the open network share them).
	openRules string
	err       error
}

// startServices creates the isolated attempt network the services and the
// worker share (dockerops.CreateIsolatedNetwork: no host address on the
// bridge, internal, IPv6 off, DNS to the container's loopback), generates
// the attempt's service credentials and writes them into the secrets
// volume (0444, root-owned; the worker mounts the volume read-only), and
// each service's own password alone into a volume of its own, the only
// secret that service mounts (writeServiceSecrets). The passwords live
// only in this step's closure: the attempt keeps none. With a network
// policy it also reads the host facts of the netns guards, and for
// open_public starts the worker's guarded netns holder.
func (a *attemptActor) startServices(ctx actor.Context) {
	files := map[string][]byte{}
	own := map[string]map[string][]byte{} // a service's own secrets volume → its password
	for _, s := range a.in.contract.Contract.ServiceTypes() {
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
		own[def.SecretsVolume(a.in.names.Prefix)] = map[string][]byte{def.SecretFile: []byte(pw)}
	}
	docker, name, image, volume, labels, netName := a.deps.Docker, services.SecretsHelperName(a.in.names.Prefix), a.image.id, a.in.names.SecretsVolume, a.in.labels, a.in.names.Network
	mode, egressNet := a.d.Sandbox.NetworkPolicy.Mode, egressNetworkName(a.in.names)
	holder := a.openGuard()
	a.step(ctx, "secrets", func(stepCtx context.Context) any {
		var done secretsDone
		var err error
		if mode == messages.NetworkOpenPublic {
			var id string
			id, err = docker.CreateRoutedNetwork(stepCtx, netName, labels, true)
			done.network = dockerops.IsolatedNetwork{ID: id, Name: netName}
			// The host's addresses are read once the attempt's bridge
			// (and its gateway) exists.
			if err == nil {
				done.guard, err = readGuardFacts()
			}
			if err == nil {
				done.holderID, done.openRules, err = holder.start(stepCtx, docker, done.guard)
			}
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
			// Once the egress bridge (and its gateway) exists.
			if done.guard, err = readGuardFacts(); err != nil {
				done.err = err
				return done
			}
		}
		if len(files) > 0 {
			done.err = writeServiceSecrets(stepCtx, docker, name, image, volume, labels, files, own)
		}
		return done
	})
}

func (a *attemptActor) onSecretsWritten(ctx actor.Context, msg secretsDone) {
	if msg.network.ID != "" || msg.egressNetworkID != "" {
		a.sidecars.network, a.sidecars.networkID, a.sidecars.egressNetworkID = msg.network.Name, msg.network.ID, msg.egressNetworkID
		a.sidecars.guard, a.sidecars.holderID, a.sidecars.openRules = msg.guard, msg.holderID, msg.openRules
		a.writeLedger(a.ledger.state)
	}
	if msg.err != nil {
		a.fail(failure.Wrap(failure.SandboxCreateFailed, msg.err, "create the attempt network or write service credentials"))
	}
	if a.verdict.failure != nil {
		a.advance(ctx)
		return
	}
	declared := a.in.contract.Contract.ServiceTypes()
	shared := services.Attempt{
		Prefix: a.in.names.Prefix, Network: a.sidecars.network,
		Labels: a.in.labels, SecurityOpts: a.in.security,
		ServiceMemoryBytes: a.d.Sandbox.RequestedResources.ServiceMemoryLimitBytes, Count: len(declared),
	}
	a.sidecars.runs = map[string]*sidecarRun{}
	for _, s := range declared {
		def, _ := services.DefinitionFor(s)
		within := a.cfg.ServiceReadyWithin
		spec := def.ContainerSpec(shared, a.sidecars.serviceImages[s].ImageID)
		if rt := serviceRuntime(a.in.confinement); rt != "" {
			spec.Runtime, spec.PIDs = rt, dockerops.GVisorPIDsLimit(spec.PIDs)
		}
		if a.sidecars.openRules != "" {
			// On the open network: the worker's guard (its services are
			// as reachable from the task as the task's own code).
			spec.Guard = &dockerops.NetGuard{Name: a.in.names.Prefix + "-guard-" + s, Image: a.sidecars.egressImage.ImageID,
				Rules: a.sidecars.openRules, Labels: a.in.labels, SecurityOpts: a.in.security}
		}
		a.spawnSidecar(ctx, serviceJob(s, spec, a.serviceProbe(def, s, within), within), s)
		a.emit(ctx, messages.RunnerEvent("sandbox_service_starting", fmt.Sprintf("Starting service %s.", s), map[string]string{
			"service": s, "image": a.sidecars.serviceImages[s].ImageID, "container": spec.Name, "alias": spec.Alias,
		}))
	}
	if a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkPublicAllowlist {
		a.startEgress(ctx)
	}
	if len(a.sidecars.runs) == 0 {
		a.startWorker(ctx) // open_public without services: nothing to wait for
		return
	}
	self := ctx.Self()
	system := ctx.ActorSystem()
	a.sidecars.timer = a.cfg.Clock.AfterFunc(a.cfg.ServicesReadyWithin, func() { system.Root.Send(self, servicesTimedOut{}) })
}

// writeServiceSecrets writes every service password into the attempt's
// secrets volume (the worker's), and each service's own password alone
// into a volume of its own, which only that service and its probe mount:
// no service sees the provider credential or another service's password.
func writeServiceSecrets(ctx context.Context, docker Docker, helper, image, volume string, labels map[string]string, files map[string][]byte, own map[string]map[string][]byte) error {
	if err := docker.WriteSecrets(ctx, helper, image, volume, labels, files); err != nil {
		return err
	}
	for _, v := range slices.Sorted(maps.Keys(own)) {
		if err := docker.CreateVolume(ctx, v, labels); err != nil {
			return err
		}
		if err := docker.WriteSecrets(ctx, helper, image, v, labels, own[v]); err != nil {
			return err
		}
	}
	return nil
}

// serviceJob is the sidecar job of service s.
func serviceJob(s string, spec dockerops.ServiceSpec, probe dockerops.ProbeSpec, within time.Duration) sidecarJob {
	return sidecarJob{
		kind: kindService, role: serviceRole(s), what: "service " + s, subject: "service " + s,
		container: spec, probe: probe, readyWithin: within,
		createCode: failure.SandboxCreateFailed, healthCode: failure.SandboxServiceHealthTimeout, stoppedCode: failure.SandboxServiceFailed,
		facts: map[string]string{
			"service": s, "container": spec.Name, "image": spec.Image, "alias": spec.Alias,
			"memoryBytes": strconv.FormatInt(spec.MemoryBytes, 10),
		},
	}
}

// serviceProbe is the readiness probe of service s (at start, and again
// on re-adoption): a container of the worker's image on the attempt
// network, with the service's own secrets volume.
func (a *attemptActor) serviceProbe(def services.Definition, s string, within time.Duration) dockerops.ProbeSpec {
	return dockerops.ProbeSpec{
		Name: services.ProbeName(a.in.names.Prefix, s), Image: a.image.id, Network: a.sidecars.network,
		Labels: a.in.labels, SecretsVolume: def.SecretsVolume(a.in.names.Prefix), SecurityOpts: a.in.security,
		User:    a.cfg.User.OrImage(),
		Cmd:     def.ProbeArgs(messages.WorkerBinaryPath, within.String()),
		Timeout: within,
	}
}

// serviceRole is service s's role in the ledger, the sampler and the
// sandbox_started event.
func serviceRole(s string) string { return "service:" + s }

// serviceEndpoints are the worker's connection details, in declaration
// order.
func (a *attemptActor) serviceEndpoints() []messages.ServiceEndpoint {
	var out []messages.ServiceEndpoint
	for _, s := range a.in.contract.Contract.ServiceTypes() {
		def, _ := services.DefinitionFor(s)
		out = append(out, def.Endpoint())
	}
	return out
}

// serviceLedger lists the planned and created service containers.
func (a *attemptActor) serviceLedger() (planned, created []ledger.Resource) {
	if a.in.contract == nil {
		return nil, nil
	}
	if a.needsNetwork() {
		planned = append(planned, ledger.Resource{Type: ledger.ResourceNetwork, Name: a.in.names.Network, Role: a.networkRole()})
		if a.sidecars.networkID != "" {
			created = append(created, ledger.Resource{Type: ledger.ResourceNetwork, Name: a.in.names.Network, ID: a.sidecars.networkID, Role: a.networkRole()})
		}
	}
	ep, ec := a.egressLedger()
	planned, created = append(planned, ep...), append(created, ec...)
	for _, s := range a.in.contract.Contract.ServiceTypes() {
		def, _ := services.DefinitionFor(s)
		if v := def.SecretsVolume(a.in.names.Prefix); v != "" {
			r := ledger.Resource{Type: ledger.ResourceVolume, Name: v, Role: "secrets:" + s}
			planned = append(planned, r)
			if a.sidecars.runs != nil { // written before any sidecar starts
				created = append(created, r)
			}
		}
		name := services.ContainerName(a.in.names.Prefix, s)
		planned = append(planned, ledger.Resource{Type: ledger.ResourceContainer, Name: name, Role: serviceRole(s)})
		if id := a.sidecars.containerID(serviceRole(s)); id != "" {
			created = append(created, ledger.Resource{Type: ledger.ResourceContainer, Name: name, ID: id, Role: serviceRole(s)})
		}
	}
	return planned, created
}
