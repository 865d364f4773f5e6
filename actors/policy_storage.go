package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// checkStorage refuses, before anything is created, an attempt whose
// volumes this runner cannot bound when the dispatch is sandbox_required
// or the operator requires bounded storage (--require-bounded-storage);
// the refusal is the confinement's own error, code
// failure.SandboxStorageUnbounded. An adoption attempt that runs anyway
// says so in its events (sandbox_storage_unbounded): its workspaceBytes
// is not enforced.
func (a *attemptActor) checkStorage(ctx actor.Context) error {
	unbounded := a.cfg.Confinement().Storage
	if unbounded == nil {
		return nil
	}
	if a.d.Sandbox.ExecutionPolicy == messages.PolicySandboxRequired || a.cfg.RequireBoundedStorage {
		return unbounded
	}
	r := a.d.Sandbox.RequestedResources
	a.emit(ctx, messages.RunnerEvent("sandbox_storage_unbounded",
		fmt.Sprintf("Attempt volumes are not bounded on this runner, so workspaceBytes (%d) is not enforced: %v.", r.Workspace(), unbounded),
		map[string]any{"workspaceBytes": r.Workspace(), "reason": unbounded.Error()}))
	return nil
}
