package actors

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/messages"
)

// workerJob assembles the hardened worker container and its start packet.
func (a *attemptActor) workerJob() (workerJob, error) {
	limits := a.limits()
	a.packetExpiry = a.fence.expiry()
	packet := messages.StartPacket{
		SchemaVersion:      messages.StartPacketSchema,
		Identity:           a.identity(),
		Task:               a.d.Task,
		WorkingDirectory:   a.contract.Contract.WorkingDirectory,
		LeaseExpiresAt:     a.packetExpiry,
		LeaseControlKey:    a.controlKey,
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
			Name:        a.names.Container,
			Image:       a.imageID,
			Network:     a.network, // the attempt network with services or a network policy; "" (none) without
			OpenNetwork: a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkOpenPublic,
			WorkingDir:  a.contract.Contract.WorkingDirectory,
			Labels:      a.labels,
			Resources:   a.d.Sandbox.RequestedResources,
			Env: slices.Concat(dockerops.WorkerEnv(a.d, a.prepared.InputCommitSHA), messages.ServiceEnv(packet.Services),
				caches.Env(a.contract.Contract.Caches), a.workerNetworkEnv()),
			SecurityOpts:    a.security,
			WorkspaceVolume: a.names.WorkspaceVolume,
			ControlVolume:   a.names.ControlVolume,
			SecretsVolume:   a.names.SecretsVolume,
			Caches:          a.cacheMounts,
			Entrypoint:      []string{messages.WorkerBinaryPath, "worker"},
		},
		bundlePath:  a.prepared.BundlePath,
		startPacket: append(raw, '\n'),
		eventKey:    messages.EventKey(a.controlKey),
		storageFull: a.storageFull(),
		runTimeout:  limits.HardWall + a.cfg.LimitGrace + runMargin,
		limits:      dockerops.RunLimits{},
	}, nil
}

// identity is what the worker must echo in its manifest.
func (a *attemptActor) identity() messages.SandboxIdentity {
	return messages.SandboxIdentity{
		DispatchAttemptID: a.d.Sandbox.DispatchAttemptID,
		ExecutionLeaseID:  a.d.Sandbox.ExecutionLeaseID,
		FencingToken:      a.d.Lease.FencingToken,
		RunnerInstanceID:  a.d.Sandbox.RunnerInstanceID,
		InputCommitSHA:    a.prepared.InputCommitSHA,
		Branch:            a.d.Lease.WorktreeKey,
		ContractDigest:    a.contract.Digest,
		ImageDigest:       a.imageID,
	}
}
