package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// The contract's package caches (package caches): per-attempt volumes are
// the attempt's own, created in the provision step with its other volumes
// and released with them; read-only project caches are found there and
// mounted when warmed.

// perAttemptCaches are the names of the contract's per-attempt caches
// (none before the contract is known).
func (a *attemptActor) perAttemptCaches() []string {
	if a.in.contract == nil {
		return nil
	}
	return a.in.contract.Contract.PerAttemptCaches()
}

// cacheVolumes are the names of the cache volumes the worker mounts.
func (a *attemptActor) cacheVolumes() []string {
	out := make([]string, 0, len(a.in.cacheMounts))
	for _, m := range a.in.cacheMounts {
		out = append(out, m.Volume)
	}
	return out
}

// emitCachePolicy announces which caches the worker gets and how (the
// seed's sandbox_cache_policy), and which read-only caches its project has
// not had warmed.
func (a *attemptActor) emitCachePolicy(ctx actor.Context, missing []string) {
	perAttempt, readonly := []string{}, []string{}
	for _, c := range a.in.contract.Contract.Caches {
		switch c.Mode {
		case contract.CachePerAttempt:
			perAttempt = append(perAttempt, c.Name)
		case contract.CacheReadOnly:
			if !slices.Contains(missing, c.Name) {
				readonly = append(readonly, c.Name)
			}
		}
	}
	if missing == nil {
		missing = []string{}
	}
	content := "Package caches are isolated to this attempt or mounted read-only from the project's warmed caches."
	if len(missing) > 0 {
		content += fmt.Sprintf(" Not warmed for this project, so not mounted: %s.", strings.Join(missing, ", "))
	}
	if len(a.in.contract.Contract.Caches) == 0 {
		content = "No package caches: the contract declares none."
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_cache_policy", content, map[string]any{
		"builderManaged":  readonly, // the seed's name for the read-only caches
		"perAttempt":      perAttempt,
		"readonly":        readonly,
		"readonlyMissing": missing,
		"volumes":         a.cacheVolumes(),
	}))
}
