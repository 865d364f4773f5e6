package actors

import (
	"maps"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// This file builds the seed's runtime-lease and volume records that
// sandbox_started and sandbox_teardown_started carry.

// startedVolumes lists the worker's volumes with their role and mount
// point, as the seed's sandbox_started does ({name, role}; forged adds
// the mount).
func (a *attemptActor) startedVolumes() []map[string]any {
	vols := []map[string]any{
		{"name": a.in.names.WorkspaceVolume, "role": "workspace", "mount": messages.WorkspaceDir},
		{"name": a.in.names.ControlVolume, "role": "control", "mount": messages.ControlDir},
		{"name": a.in.names.SecretsVolume, "role": "secrets", "mount": dockerops.SecretsDir, "readOnly": true},
	}
	if c := a.credentialsMount(); c != nil {
		vols = append(vols, map[string]any{"name": c.Volume, "role": "credentials", "mount": c.Target, "readOnly": !c.Writable})
	}
	for _, m := range a.in.cacheMounts {
		vols = append(vols, map[string]any{"name": m.Volume, "role": "cache", "mount": m.Target, "readOnly": m.ReadOnly})
	}
	return vols
}

// runtimeLease is the seed's runtime isolation lease in state: who owns
// the attempt's Docker resources, until when, and what it reserved. The
// fencing token is left out: events reach every subscriber, and the token
// is a credential of the lease API.
func (a *attemptActor) runtimeLease(state string) map[string]any {
	d := a.d
	res := a.reservation()
	return map[string]any{
		"leaseId":           d.Sandbox.ExecutionLeaseID,
		"dispatchAttemptId": d.Sandbox.DispatchAttemptID,
		"executionLeaseId":  d.Sandbox.ExecutionLeaseID,
		"runnerId":          d.Execution.RunnerID,
		"runnerInstanceId":  d.Sandbox.RunnerInstanceID,
		"worktreeKey":       d.Lease.WorktreeKey,
		"worktreePath":      messages.WorkspaceDir,
		"mode":              "docker",
		"state":             state,
		"expiresAt":         d.Lease.ExpiresAt,
		"resources": map[string]any{
			"memoryReservationBytes": res.MemoryBytes,
			"cpuMillis":              res.CPUMillis,
			"pids":                   res.PIDs,
			"ports":                  []any{},
		},
	}
}

// reservation is what the attempt reserved on the host: the worker's, its
// services' and the runtime's memory, its CPU and PIDs.
func (a *attemptActor) reservation() ledger.Reservation {
	r := a.d.Sandbox.RequestedResources
	return ledger.Reservation{MemoryBytes: r.WorkerMemoryLimitBytes + r.ServiceMemoryLimitBytes + r.RuntimeOverheadBytes,
		CPUMillis: r.CPUMillis, PIDs: r.PIDs}
}

// ledgerSnapshot is the seed's snapshot the ledger keeps beside the
// resources: the reservation, the sandbox's paths with their roles (the
// volumes' mounts and the worker's tmpfs) and the exact labels of the
// attempt's objects (nil before the image is known).
func (a *attemptActor) ledgerSnapshot() (*ledger.Reservation, []ledger.Path, map[string]string) {
	res := a.reservation()
	paths := []ledger.Path{
		{Path: messages.WorkspaceDir, Role: "worktree"},
		{Path: messages.ControlDir, Role: "control"},
		{Path: messages.TempDir, Role: "temporary"},
		{Path: messages.HomeDir, Role: "home"},
		{Path: dockerops.SecretsDir, Role: "secrets"},
	}
	if c := a.credentialsMount(); c != nil {
		paths = append(paths, ledger.Path{Path: c.Target, Role: "credentials"})
	}
	for _, m := range a.in.cacheMounts {
		paths = append(paths, ledger.Path{Path: m.Target, Role: "cache"})
	}
	return &res, paths, maps.Clone(a.in.labels)
}
