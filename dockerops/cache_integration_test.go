package dockerops

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/sandbox/contract"
)

// TestIntegrationPlainCacheVolumesBelongToTheWorker mounts every contract
// cache as a plain (unbounded) per-attempt volume: the engine's copy-up
// from the agent image's skeleton gives each the worker's owner, each
// starts empty and is writable, no root-owned directory appears in HOME,
// and the volumes go with the attempt's teardown (provision's cleanup
// checks no labelled volume is left).
func TestIntegrationPlainCacheVolumesBelongToTheWorker(t *testing.T) {
	var targets []string
	for _, target := range contract.CacheTargets {
		targets = append(targets, target)
	}
	script := strings.Join([]string{
		`for d in ` + strings.Join(targets, " ") + `; do`,
		`  n=$(ls -A $d | wc -l)`,
		`  if echo x > $d/probe; then w=yes; else w=no; fi`,
		`  echo "cache $d $(stat -c '%u:%g' $d) entries=$n write=$w"`,
		`done`,
		`echo "root-owned-in-home=$(find /home/forge -maxdepth 1 -mindepth 1 -user 0 | wc -l)"`,
	}, "\n")
	s := provision(t, script, func(spec *WorkerSpec) {
		names, err := NamesFor(spec.Labels[LabelAttemptID])
		require.NoError(t, err)
		for name, target := range contract.CacheTargets {
			require.NoError(t, requireEngine(t).CreateVolume(testCtx(t), names.CacheVolume(name), spec.Labels))
			spec.Caches = append(spec.Caches, CacheMount{Volume: names.CacheVolume(name), Target: target})
		}
	})
	lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	for _, target := range targets {
		assert.Contains(t, lines, "cache "+target+" 10001:10001 entries=0 write=yes", strings.Join(lines, "\n"))
	}
	assert.Contains(t, lines, "root-owned-in-home=0", "the engine made no root-owned parent in HOME")
}
