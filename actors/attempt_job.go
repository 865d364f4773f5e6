package actors

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/messages"
)

// workerJob assembles the hardened worker container and its start packet.
func (a *attemptActor) workerJob() (workerJob, error) {
	limits := a.limits()
	conf := a.in.confinement
	a.worker.packetExpiry = a.fence.expiry()
	packet := messages.StartPacket{
		SchemaVersion:      messages.StartPacketSchema,
		Identity:           a.identity(),
		Task:               a.d.Task,
		WorkingDirectory:   a.in.contract.Contract.WorkingDirectory,
		LeaseExpiresAt:     a.worker.packetExpiry,
		LeaseControlKey:    a.worker.controlKey,
		TaskTimeoutSeconds: int(limits.HardWall / time.Second),
		IdleTimeoutSeconds: int(workerIdle(limits) / time.Second),
		Services:           a.serviceEndpoints(),
		ReleaseWaitMillis:  int(releaseWait / time.Millisecond),
	}
	raw, err := json.Marshal(packet)
	if err != nil {
		return workerJob{}, fmt.Errorf("start packet: %w", err)
	}
	return workerJob{
		spec: dockerops.WorkerSpec{
			Name:        a.in.names.Container,
			Image:       a.image.id,
			User:        a.cfg.User.OrImage(),
			Network:     a.sidecars.network, // the attempt network with services or a network policy; "" (none) without
			OpenNetwork: a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkOpenPublic,
			// open_public: the guarded netns holder's namespace.
			NetnsContainer: a.sidecars.holderID,
			WorkingDir:     a.in.contract.Contract.WorkingDirectory,
			Labels:         a.in.labels,
			Resources:      a.d.Sandbox.RequestedResources,
			Env: slices.Concat(dockerops.WorkerEnv(a.d, a.in.prepared.InputCommitSHA), messages.ServiceEnv(packet.Services),
				caches.Env(a.in.contract.Contract.Caches), a.workerNetworkEnv()),
			SecurityOpts:    a.in.security,
			WorkspaceVolume: a.in.names.WorkspaceVolume,
			ControlVolume:   a.in.names.ControlVolume,
			SecretsVolume:   a.in.names.SecretsVolume,
			Credentials:     a.credentialsMount(),
			Caches:          a.in.cacheMounts,
			Entrypoint:      []string{messages.WorkerBinaryPath, "worker"},
			Runtime:         workerRuntime(conf, a.sidecars.network),
			GVisor:          gVisorFloor(conf),
			Hosts:           a.workerHosts(conf),
		},
		bundlePath:   a.in.prepared.BundlePath,
		bundlePlaced: a.in.bundlePlaced,
		startPacket:  append(raw, '\n'),
		eventKey:     messages.EventKey(a.worker.controlKey),
		storageFull:  a.storageFull(),
		runTimeout:   limits.HardWall + a.cfg.LimitGrace + runMargin,
		limits:       dockerops.RunLimits{MaxStdoutBytes: messages.WorkerStdoutBudgetBytes},
	}, nil
}

// identity is what the worker must echo in its manifest.
func (a *attemptActor) identity() messages.SandboxIdentity {
	return messages.SandboxIdentity{
		DispatchAttemptID: a.d.Sandbox.DispatchAttemptID,
		ExecutionLeaseID:  a.d.Sandbox.ExecutionLeaseID,
		FencingToken:      a.d.Lease.FencingToken,
		RunnerInstanceID:  a.d.Sandbox.RunnerInstanceID,
		InputCommitSHA:    a.in.prepared.InputCommitSHA,
		Branch:            a.d.Lease.WorktreeKey,
		ContractDigest:    a.in.contract.Digest,
		ImageDigest:       a.image.id,
	}
}

// workerHosts are the worker's /etc/hosts names under the gvisor floor on
// an attempt network: every sidecar by its alias (a service by its type,
// the egress proxy by egress.Alias). gVisor's network stack does not reach
// the engine's embedded resolver, so the worker resolves them there.
func (a *attemptActor) workerHosts(conf Confinement) []dockerops.HostAlias {
	if !gVisorFloor(conf) || a.sidecars.network == "" {
		return nil
	}
	var hosts []dockerops.HostAlias
	for _, r := range a.sidecars.runs {
		alias := r.service
		if alias == "" {
			alias = egress.Alias
		}
		hosts = append(hosts, dockerops.HostAlias{Alias: alias, Container: r.containerID})
	}
	slices.SortFunc(hosts, func(x, y dockerops.HostAlias) int { return strings.Compare(x.Alias, y.Alias) })
	return hosts
}
