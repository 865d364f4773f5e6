package caches

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/contract"
)

func TestEnvNamesEachToolsMountedDirectory(t *testing.T) {
	all := []contract.Cache{{Name: "npm"}, {Name: "pnpm"}, {Name: "yarn"}, {Name: "nuget"}, {Name: "cargo"}, {Name: "pip"}}
	assert.Equal(t, []string{
		"npm_config_cache=/home/forge/.npm",
		"npm_config_store_dir=/home/forge/.pnpm-store",
		"YARN_CACHE_FOLDER=/home/forge/.yarn-cache",
		"NUGET_PACKAGES=/home/forge/.nuget-packages",
		"CARGO_HOME=/home/forge/.cargo",
		"PIP_CACHE_DIR=/home/forge/.pip-cache",
	}, Env(all))
	assert.Empty(t, Env(nil))
	assert.Empty(t, Env([]contract.Cache{{Name: "maven"}}), "an unknown cache gives nothing")
	for name := range contract.CacheTargets {
		target, ok := Target(name)
		require.True(t, ok)
		env := Env([]contract.Cache{{Name: name}})
		require.Len(t, env, 1, name)
		_, dir, _ := strings.Cut(env[0], "=")
		assert.Equal(t, target, dir, "%s's variable names its mount point", name)
		assert.Equal(t, "/home/forge", path.Dir(target), "a direct child of HOME: the engine makes no root-owned parent")
	}
	_, ok := Target("maven")
	assert.False(t, ok)
}

func TestNamesAndLabels(t *testing.T) {
	names, err := dockerops.NamesFor("0b5a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b")
	require.NoError(t, err)
	assert.Equal(t, "forge-0b5a1b2c3d4e4f508a6b7c8d9e0f1a2b-cache-npm", names.CacheVolume("npm"), "the seed's name")

	a, b := ProjectVolume("acme/web", "npm"), ProjectVolume("acme/api", "npm")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^forge-cache-[0-9a-f]{16}-npm$`, a)
	assert.Equal(t, a, ProjectVolume("acme/web", "npm"), "stable")
	assert.Equal(t, ProjectVolume("evil\x00name", "pip"), ProjectVolume("evil name", "pip"), "named by the label value")
	assert.Equal(t, map[string]string{"dev.forge.project": "acme/web", LabelCache: "npm", LabelCacheMode: "readonly"}, ProjectLabels("acme/web", "npm"))
	_, owned := ProjectLabels("acme/web", "npm")[dockerops.LabelAttemptID]
	assert.False(t, owned, "no attempt owns a project cache: no teardown or reaper removes it")

	attempt := map[string]string{dockerops.LabelManaged: "true", dockerops.LabelAttemptID: "x"}
	got := AttemptLabels(attempt, "pip")
	assert.Equal(t, "pip", got[LabelCache])
	assert.Equal(t, "per_attempt", got[LabelCacheMode])
	assert.Equal(t, "x", got[dockerops.LabelAttemptID])
	assert.Len(t, attempt, 2, "the attempt's labels are not changed")
}

func TestPolicy(t *testing.T) {
	perAttempt := []contract.Cache{{Name: "npm", Mode: contract.CachePerAttempt}}
	readonly := []contract.Cache{{Name: "pip", Mode: contract.CacheReadOnly}}
	for _, tc := range []struct {
		modes          string
		perAttempt, ro bool
		canonical      string
	}{
		{"per_attempt,readonly", true, true, "per_attempt,readonly"},
		{"readonly, per_attempt", true, true, "per_attempt,readonly"},
		{"per_attempt", true, false, "per_attempt"},
		{"readonly", false, true, "readonly"},
		{"none", false, false, "none"},
	} {
		p, err := ParseModes(tc.modes)
		require.NoError(t, err, tc.modes)
		assert.Equal(t, tc.canonical, p.String())
		assert.Equal(t, tc.perAttempt, p.Check(perAttempt) == nil, tc.modes)
		assert.Equal(t, tc.ro, p.Check(readonly) == nil, tc.modes)
		if err := p.Check(append(perAttempt, readonly...)); err != nil {
			assert.Equal(t, failure.SandboxCachesUnsupported, failure.CodeOf(err))
		}
	}
	assert.Equal(t, "per_attempt,readonly", Policy{}.String(), "the zero policy allows both, as the seed")
	for _, bad := range []string{"", "shared", "per_attempt,", "none,readonly"} {
		_, err := ParseModes(bad)
		assert.Error(t, err, bad)
	}
}
