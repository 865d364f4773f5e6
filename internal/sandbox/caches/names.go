package caches

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/contract"
)

// Labels of cache volumes. A per-attempt cache carries the attempt's
// ownership labels as well; a project cache carries dockerops.LabelProject.
const (
	LabelCache     = "dev.forge.cache"      // the cache's name (npm, pip, …)
	LabelCacheMode = "dev.forge.cache-mode" // readonly or per_attempt
)

// AttemptLabels are the labels of a per-attempt cache volume (named by
// dockerops.Names.CacheVolume): the
// attempt's labels plus the cache's.
func AttemptLabels(attempt map[string]string, name string) map[string]string {
	out := make(map[string]string, len(attempt)+2)
	for k, v := range attempt {
		out[k] = v
	}
	out[LabelCache] = name
	out[LabelCacheMode] = contract.CachePerAttempt
	return out
}

// ProjectVolume is the read-only cache volume of a project. The project
// name is free text, so the volume is named by its digest.
func ProjectVolume(project, name string) string {
	sum := sha256.Sum256([]byte(dockerops.LabelValue(project)))
	return "forge-cache-" + hex.EncodeToString(sum[:8]) + "-" + name
}

// ProjectLabels are the labels of a project's read-only cache volume. It
// carries no attempt ownership, so no reaper or teardown ever removes it;
// the collection (Collect) does, by age.
func ProjectLabels(project, name string) map[string]string {
	return map[string]string{
		dockerops.LabelProject: dockerops.LabelValue(project),
		LabelCache:             name,
		LabelCacheMode:         contract.CacheReadOnly,
	}
}
