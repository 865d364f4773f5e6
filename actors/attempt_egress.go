package actors

import (
	"context"
	"fmt"
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

// The attempt's network policy. none: network mode none, unless services
// need the isolated attempt network. public_allowlist: the isolated
// attempt network, and the egress proxy (a sidecar actor, sidecar.go) as the
// only member of both it and the attempt's egress network; the worker
// starts once the proxy (and every service) is ready, with the proxy
// variables in its environment, and the proxy's death fails the attempt
// with sandbox_egress_failed. open_public (when the operator allows it):
// a routed attempt network, with the engine's resolver; the worker joins
// the network namespace of a netns holder. Below squid, and below an
// open_public worker, the namespace is guarded by L3 rules loaded before
// any untrusted input reaches it (egress.GuardRules, dockerops.GuardNetns).

// roleEgressProxy is the proxy container's role in the ledger, the
// sampler and the sandbox_started event.
const roleEgressProxy = "egress_proxy"

// egressStopGrace is squid's time to close before SIGKILL (its own
// shutdown_lifetime is 1 s).
const egressStopGrace = 3 * time.Second

func egressNetworkName(n dockerops.Names) string   { return n.Network + "-egress" }
func egressContainerName(n dockerops.Names) string { return n.Prefix + "-egress" }
func egressProbeName(n dockerops.Names) string     { return services.ProbeName(n.Prefix, services.Egress) }
func egressGuardName(n dockerops.Names) string     { return n.Prefix + "-guard-egress" }
func holderName(n dockerops.Names) string          { return n.Prefix + "-netns" }
func holderGuardName(n dockerops.Names) string     { return n.Prefix + "-guard-netns" }

// roleNetnsHolder is the open_public netns holder's role in the ledger.
const roleNetnsHolder = "netns_holder"

// readGuardFacts reads the host facts of the netns guards at attempt
// start: the host's own addresses and its resolvers.
func readGuardFacts() (egress.GuardFacts, error) {
	ifaces, err := dockerops.LocalInterfaces()
	if err != nil {
		return egress.GuardFacts{}, failure.Wrap(failure.SandboxEgressFailed, err, "read the host's addresses for the netns guard")
	}
	var f egress.GuardFacts
	for _, ifc := range ifaces {
		for _, p := range ifc.Addrs {
			f.HostAddrs = append(f.HostAddrs, p.Addr())
		}
	}
	f.Resolvers = egress.HostResolvers()
	return f, nil
}

// openGuard is what an open_public attempt's step needs to start and guard
// the worker's netns holder.
type openGuard struct {
	holder dockerops.NetnsHolder
	guard  dockerops.NetGuard
	opts   egress.Options
}

func (a *attemptActor) openGuard() openGuard {
	image := a.sidecars.egressImage.ImageID
	return openGuard{
		holder: dockerops.NetnsHolder{Name: holderName(a.in.names), Image: image, Network: a.in.names.Network,
			Labels: a.in.labels, SecurityOpts: a.in.security},
		guard: dockerops.NetGuard{Name: holderGuardName(a.in.names), Image: image, Labels: a.in.labels, SecurityOpts: a.in.security},
		opts:  a.cfg.Egress,
	}
}

// start starts the holder and guards its namespace, letting the worker
// reach its services on the attempt network's subnet; it returns the
// holder's id (also with an error, once it exists) and the rules.
func (g openGuard) start(ctx context.Context, docker SidecarDocker, facts egress.GuardFacts) (string, string, error) {
	held, err := docker.StartNetnsHolder(ctx, g.holder)
	if err != nil {
		return held.ID, "", err
	}
	// The subnet is open to the worker, but for its gateway: the host.
	facts.Local = held.Subnet
	facts.HostAddrs = append(slices.Clone(facts.HostAddrs), held.Gateway)
	g.guard.Rules = egress.GuardRules(g.opts, facts)
	return held.ID, g.guard.Rules, docker.GuardNetns(ctx, held.ID, g.guard)
}

// needsNetwork reports whether the attempt gets an attempt network.
func (a *attemptActor) needsNetwork() bool {
	return (a.in.contract != nil && len(a.in.contract.Contract.Services) > 0) || a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkNone
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
	spec := dockerops.EgressSpec{
		Name: egressContainerName(a.in.names), Image: a.sidecars.egressImage.ImageID,
		EgressNetwork: egressNetworkName(a.in.names), AttemptNetwork: a.sidecars.network, Alias: egress.Alias,
		Upstreams: opts.Upstreams, UID: egress.UID, RunDir: egress.RunDir,
		Config: egress.SquidConfig(domains, opts), Hosts: egress.HostsFile(opts),
		Labels: a.in.labels, SecurityOpts: a.in.security, MemoryBytes: egressProxyMemory,
		Guard: dockerops.NetGuard{Name: egressGuardName(a.in.names), Image: a.sidecars.egressImage.ImageID,
			Rules: egress.GuardRules(opts, a.sidecars.guard), Labels: a.in.labels, SecurityOpts: a.in.security},
	}
	a.spawnSidecar(ctx, egressJob(spec, a.egressProbe(within), within), "")
	a.emit(ctx, messages.RunnerEvent("sandbox_egress_starting", "Starting the egress proxy.", map[string]any{
		"image": a.sidecars.egressImage.ImageID, "container": spec.Name, "alias": egress.Alias,
		"allowedHosts": a.d.Sandbox.NetworkPolicy.AllowedHosts, "ports": opts.AllowedPorts(),
	}))
}

// egressProbe is the egress proxy's readiness probe (at start, and again
// on re-adoption).
func (a *attemptActor) egressProbe(within time.Duration) dockerops.ProbeSpec {
	return dockerops.ProbeSpec{
		Name: egressProbeName(a.in.names), Image: a.image.id, Network: a.sidecars.network,
		Labels: a.in.labels, SecurityOpts: a.in.security, User: a.cfg.User.OrImage(), // no secret: the proxy has none
		Cmd: []string{messages.WorkerBinaryPath, "worker", "probe", "--service", services.Egress,
			"--host", egress.Alias, "--port", fmt.Sprint(egress.ProxyPort), "--within", within.String()},
		Timeout: within,
	}
}

// egressJob is the egress proxy's sidecar job: every failure is
// sandbox_egress_failed, and its access log becomes bounded events.
func egressJob(spec dockerops.EgressSpec, probe dockerops.ProbeSpec, within time.Duration) sidecarJob {
	return sidecarJob{
		kind: kindEgress, role: roleEgressProxy, what: "egress proxy", subject: "the egress proxy",
		container: spec, probe: probe, readyWithin: within,
		createCode: failure.SandboxEgressFailed, healthCode: failure.SandboxEgressFailed, stoppedCode: failure.SandboxEgressFailed,
		accessLog: true, stopGrace: egressStopGrace,
		facts: map[string]string{
			"container": spec.Name, "image": spec.Image, "alias": spec.Alias, "egressNetwork": spec.EgressNetwork,
			"memoryBytes": strconv.FormatInt(spec.MemoryBytes, 10),
		},
	}
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

// egressLedger lists the planned and created egress network and proxy.
func (a *attemptActor) egressLedger() (planned, created []ledger.Resource) {
	if a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkOpenPublic {
		holder := ledger.Resource{Type: ledger.ResourceContainer, Name: holderName(a.in.names), Role: roleNetnsHolder}
		planned = []ledger.Resource{holder}
		if a.sidecars.holderID != "" {
			holder.ID = a.sidecars.holderID
			created = []ledger.Resource{holder}
		}
		return planned, created
	}
	if a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkPublicAllowlist {
		return nil, nil
	}
	network, proxy := egressNetworkName(a.in.names), egressContainerName(a.in.names)
	planned = []ledger.Resource{
		{Type: ledger.ResourceNetwork, Name: network, Role: "egress"},
		{Type: ledger.ResourceContainer, Name: proxy, Role: roleEgressProxy},
	}
	if a.sidecars.egressNetworkID != "" {
		created = append(created, ledger.Resource{Type: ledger.ResourceNetwork, Name: network, ID: a.sidecars.egressNetworkID, Role: "egress"})
	}
	if id := a.sidecars.containerID(roleEgressProxy); id != "" {
		created = append(created, ledger.Resource{Type: ledger.ResourceContainer, Name: proxy, ID: id, Role: roleEgressProxy})
	}
	return planned, created
}

// workerNetworkEnv is the worker's proxy environment with public_allowlist:
// NO_PROXY names the local names and the service aliases.
func (a *attemptActor) workerNetworkEnv() []string {
	if a.d.Sandbox.NetworkPolicy.Mode != messages.NetworkPublicAllowlist {
		return nil
	}
	return egress.WorkerEnv(a.in.contract.Contract.ServiceTypes())
}
