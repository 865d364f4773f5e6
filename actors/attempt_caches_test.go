package actors

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/messages"
)

func TestAttemptMountsItsCachesAndSaysWhichAreMissing(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.contract = "version: 1\nworkingDirectory: /workspace\ncaches:\n" +
		"  - {name: npm, mode: per_attempt}\n  - {name: pip, mode: readonly}\n  - {name: cargo, mode: readonly}\n  - {name: yarn, mode: readonly}\n"
	d := testDispatch(time.Now().Add(time.Hour))
	host.volumeLabels = map[string]map[string]string{
		caches.ProjectVolume(d.Repo.Name, "pip"): caches.ProjectLabels(d.Repo.Name, "pip"),
		// A volume of the cargo cache's name that is not the project's
		// cache (other labels) is never mounted.
		caches.ProjectVolume(d.Repo.Name, "cargo"): {"dev.forge.cache": "cargo"},
	}
	h := newHarness(t, host, nil)
	probe := h.submit(t, d)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)

	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	spec := host.workerSpec()
	assert.Equal(t, []dockerops.CacheMount{
		{Volume: names.CacheVolume("npm"), Target: "/home/forge/.npm"},
		{Volume: caches.ProjectVolume(d.Repo.Name, "pip"), Target: "/home/forge/.pip-cache", ReadOnly: true},
	}, spec.Caches)
	assert.Subset(t, spec.Env, []string{"npm_config_cache=/home/forge/.npm", "PIP_CACHE_DIR=/home/forge/.pip-cache",
		"CARGO_HOME=/home/forge/.cargo", "YARN_CACHE_FOLDER=/home/forge/.yarn-cache"})
	assert.Equal(t, 4, host.called("volume"), "workspace, control, secrets and the per-attempt npm cache")
	assert.Equal(t, 3, host.called("volumeinspect"), "each read-only cache is looked up")

	var data map[string]any
	for _, ev := range actortest.All[messages.AttemptEvent](probe) {
		if ev.Event.EventType == "sandbox_cache_policy" {
			require.NoError(t, json.Unmarshal([]byte(*ev.Event.Data), &data))
			assert.Contains(t, ev.Event.Content, "cargo, yarn")
		}
	}
	require.NotNil(t, data, "the cache policy event")
	assert.Equal(t, []any{"npm"}, data["perAttempt"])
	assert.Equal(t, []any{"pip"}, data["readonly"])
	assert.Equal(t, []any{"pip"}, data["builderManaged"], "the seed's key for the read-only caches")
	assert.Equal(t, []any{"cargo", "yarn"}, data["readonlyMissing"])
}
