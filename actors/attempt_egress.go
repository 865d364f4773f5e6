package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// The attempt's network policy. none: network mode none, unless services
// need the isolated attempt network. public_allowlist: the isolated
// attempt network, and the egress proxy (a child actor, egress.go) as the
// only member of both it and the attempt's egress network; the worker
// starts once the proxy (and every service) is ready, with the proxy
// variables in its environment, and the proxy's death fails the attempt
// with sandbox_egress_failed. open_public (when the operator allows it):
// a routed attempt network, with the engine's resolver.

// roleEgressProxy is the proxy container's role in the ledger, the
// sampler and the sandbox_started event.
const roleEgressProxy = "egress_proxy"

// egressRun is the proxy's state as the attempt knows it.
type egressRun struct {
	pid         *actor.PID
	containerID string
	ready       bool
	done        bool // failed or cancelled: its actor stops once its calls returned
}

func egressNetworkName(n dockerops.Names) string   { return n.Network + "-egress" }
func egressContainerName(n dockerops.Names) string { return n.Prefix + "-egress" }
func egressProbeName(n dockerops.Names) string     { return services.ProbeName(n.Prefix, services.Egress) }

// needsNetwork reports whether the attempt gets an attempt network.
func (a *attemptActor) needsNetwork() bool {
	return (a.contract != nil && len(a.contract.Contract.Services) > 0) || a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkNone
}

// networkRole is the attempt network's role: "open" for open_public, else
// "internal".
func (a *attemptActor) networkRole() string {
	if a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkOpenPublic {
		return "open"
	}
	return "internal"
}

// startEgress spawns the proxy actor with the configuration generated from
// the dispatch's allowlist (validated at admission) and the operator's
// options.
func (a *attemptActor) startEgress(ctx actor.Context) {
	domains, err := egress.Domains(a.d.Sandbox.NetworkPolicy.AllowedHosts)
	if err != nil {
		a.abort(ctx, err)
		return
	}
	opts := a.cfg.Egress
	within := a.cfg.ServiceReadyWithin
	job := egressJob{
		spec: dockerops.EgressSpec{
			Name: egressContainerName(a.names), Image: a.egressImage.ImageID,
			EgressNetwork: egressNetworkName(a.names), AttemptNetwork: a.network, Alias: egress.Alias,
			Upstreams: opts.Upstreams, UID: egress.UID, RunDir: egress.RunDir,
			Config: egress.SquidConfig(domains, opts), Hosts: egress.HostsFile(opts),
			Labels: a.labels, SecurityOpts: a.security, MemoryBytes: egressProxyMemory,
		},
		probe: dockerops.ProbeSpec{
			Name: egressProbeName(a.names), Image: a.imageID, Network: a.network,
			Labels: a.labels, SecretsVolume: a.names.SecretsVolume, SecurityOpts: a.security,
			Cmd: []string{messages.WorkerBinaryPath, "worker", "probe", "--service", services.Egress,
				"--host", egress.Alias, "--port", fmt.Sprint(egress.ProxyPort), "--within", within.String()},
			Timeout: within,
		},
		readyWithin: within,
	}
	a.egress = &egressRun{pid: a.children.spawn(ctx, newEgressProps(a.deps.Docker, job), kindEgress)}
	a.emit(ctx, messages.RunnerEvent("sandbox_egress_starting", "Starting the egress proxy.", map[string]any{
		"image": a.egressImage.ImageID, "container": job.spec.Name, "alias": egress.Alias,
		"allowedHosts": a.d.Sandbox.NetworkPolicy.AllowedHosts, "ports": opts.AllowedPorts(),
	}))
}

func (a *attemptActor) onEgressStarted(msg EgressStarted) {
	if a.egress == nil {
		return
	}
	a.egress.containerID = msg.ContainerID
	if a.ledgerWritten && !a.tearingDown {
		a.writeLedger(a.ledgerState)
	}
}

func (a *attemptActor) onEgressReady(ctx actor.Context, msg EgressReady) {
	if a.egress == nil || a.failure != nil {
		return
	}
	a.egress.ready = true
	a.emit(ctx, messages.RunnerEvent("sandbox_egress_ready", "The egress proxy is ready.", map[string]string{"containerId": msg.ContainerID}))
	a.startWorkerWhenReady(ctx)
}

func (a *attemptActor) onEgressFailed(ctx actor.Context, msg EgressFailed) {
	if a.egress != nil {
		a.egress.done = true
	}
	if a.tearingDown || a.workerExit != nil {
		return // the worker is done with the proxy
	}
	a.emit(ctx, messages.FailureEvent(string(failureCode(msg.Err)), msg.Err.Error(), nil))
	a.abort(ctx, msg.Err)
}

// onEgressAccess turns one access record into an attempt event: what the
// task tried to reach and what the proxy did.
func (a *attemptActor) onEgressAccess(ctx actor.Context, msg EgressAccess) {
	r := msg.Access
	a.emit(ctx, messages.RunnerEvent("sandbox_egress_request",
		fmt.Sprintf("Egress %s: %s %s:%d (%d, %d bytes).", r.Decision, r.Method, r.Host, r.Port, r.Status, r.Bytes),
		map[string]any{"host": r.Host, "port": r.Port, "method": r.Method, "status": r.Status,
			"decision": string(r.Decision), "bytes": r.Bytes, "result": r.Result}))
}

func (a *attemptActor) onEgressLogSummary(ctx actor.Context, msg EgressLogSummary) {
	if msg.Dropped == 0 && msg.Unparsed == 0 {
		return
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_egress_log_truncated",
		fmt.Sprintf("The egress proxy's access log was cut: %d requests reported, %d more not reported, %d lines unreadable.", msg.Reported, msg.Dropped, msg.Unparsed),
		map[string]int{"reported": msg.Reported, "dropped": msg.Dropped, "unparsed": msg.Unparsed}))
}

// cancelEgress asks the proxy actor to stop.
func (a *attemptActor) cancelEgress(ctx actor.Context) {
	if a.egress != nil && !a.egress.done && a.egress.pid != nil {
		a.egress.done = true
		ctx.Send(a.egress.pid, CancelEgress{})
	}
}

// onEgressTerminated forgets the stopped proxy actor (reporting whether
// who was it); one that stopped without reporting fails the attempt.
func (a *attemptActor) onEgressTerminated(ctx actor.Context, who *actor.PID) bool {
	if a.egress == nil || a.egress.pid == nil || !who.Equal(a.egress.pid) {
		return false
	}
	a.egress.pid = nil
	if !a.egress.done && !a.tearingDown && a.workerExit == nil {
		a.abort(ctx, failure.New(failure.SandboxRuntimeFailed, "the egress proxy actor stopped unexpectedly"))
		return true
	}
	a.advance(ctx)
	return true
}

// egressLedger lists the planned and created egress network and proxy.
func (a *attemptActor) egressLedger() (planned, created []ledger.Resource) {
	if a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkPublicAllowlist {
		return nil, nil
	}
	network, proxy := egressNetworkName(a.names), egressContainerName(a.names)
	planned = []ledger.Resource{
		{Type: ledger.ResourceNetwork, Name: network, Role: "egress"},
		{Type: ledger.ResourceContainer, Name: proxy, Role: roleEgressProxy},
	}
	if a.egressNetworkID != "" {
		created = append(created, ledger.Resource{Type: ledger.ResourceNetwork, Name: network, ID: a.egressNetworkID, Role: "egress"})
	}
	if a.egress != nil && a.egress.containerID != "" {
		created = append(created, ledger.Resource{Type: ledger.ResourceContainer, Name: proxy, ID: a.egress.containerID, Role: roleEgressProxy})
	}
	return planned, created
}

// workerNetworkEnv is the worker's proxy environment with public_allowlist:
// NO_PROXY names the local names and the service aliases.
func (a *attemptActor) workerNetworkEnv() []string {
	if a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkPublicAllowlist {
		return nil
	}
	return egress.WorkerEnv(a.contract.Contract.ServiceTypes())
}
