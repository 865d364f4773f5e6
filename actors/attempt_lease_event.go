package actors

import (
	"github.com/forgedev/forged/dockerops"
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
	res := d.Sandbox.RequestedResources
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
			"memoryReservationBytes": res.WorkerMemoryLimitBytes + res.ServiceMemoryLimitBytes + res.RuntimeOverheadBytes,
			"cpuMillis":              res.CPUMillis,
			"pids":                   res.PIDs,
			"ports":                  []any{},
		},
	}
}
