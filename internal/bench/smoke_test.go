package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// TestSmoke is CI's short run of the benchmark suite on the real engine:
// every measurement completes (one run each, a 3-attempt burst, 9
// orphans, 3 queued attempts, no Go benchmarks), nothing of the run's
// runners is left, and the report renders. It asserts no timing.
func TestSmoke(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	forged := enginetest.ForgedBinary(t)
	// B8's upgraded daemon: the same program with another digest.
	upgraded, err := workerOfAnotherDigest(forged, t.TempDir())
	require.NoError(t, err)
	env, err := Setup(ctx, Config{
		ForgedBinary: forged, UpgradedForged: upgraded, WorkDir: t.TempDir(), Busybox: "/bin/busybox",
		Runs: 1, BurstAttempts: 3, BurstCapacity: 3, BurstRuns: 1, ReapResources: 9, ReapRuns: 1, QueuedAttempts: 3,
		KeepBaseImage: true, ScaleSizes: []RepoSize{{Files: 50, Commits: 5}}, ScaleRuns: 1, ScaleCache: t.TempDir(),
	})
	require.NoError(t, err)
	res := env.Run(ctx)
	require.NoError(t, env.Close())
	require.Empty(t, res.Errors)
	require.Zero(t, env.Leftovers, "the measurements left labelled resources behind")
	for _, id := range env.runnerIDs() {
		require.Empty(t, enginetest.Labelled(t, engine, "dev.forge.runner-id="+id), "runner %s", id)
	}
	for _, name := range []string{"forged run", "daemon", "seed CLI", "floor", "floor, no network"} {
		require.Equal(t, 1, res.B1[name].N, name)
		require.Positive(t, res.B1[name].Median, name)
	}
	require.Equal(t, 1, res.B2["daemon"].N)
	require.Equal(t, 1, res.B6["reaper"].N)
	require.NotNil(t, res.B4EngineStop)
	require.NotNil(t, res.B5QueuedRSS)
	require.Positive(t, res.B5IdleRSS.Median)
	require.Len(t, res.B7, 1)
	require.Equal(t, 1, res.B7[0].Attempt.N)
	require.Positive(t, res.B7[0].Workspace.Median)
	require.Positive(t, res.B7[0].StepsFloor())
	require.NotEmpty(t, res.B7[0].Timeline)
	// B8: the image cache survives a daemon of another digest, not a
	// worker of another digest.
	require.NotNil(t, res.B8)
	require.Equal(t, 1, res.B8.DaemonUpgradeHits, "the first attempt after a daemon upgrade hits the image cache")
	require.Zero(t, res.B8.WorkerUpgradeHits, "a worker of another digest gets an image of its own")
	for _, name := range []string{b8Warm, b8DaemonUpgrade, b8WorkerUpgrade} {
		require.Equal(t, 1, res.B8.Attempts[name].N, name)
	}

	var md, js bytes.Buffer
	require.NoError(t, res.WriteMarkdown(&md, "## Notes\n\nhand-written"))
	require.Contains(t, md.String(), "| B1 | daemon ≤ 1.0× the floor |")
	require.Contains(t, md.String(), "hand-written")
	require.Contains(t, md.String(), "## B7: repository scale")
	require.Contains(t, md.String(), "## B8: the first attempt after an upgrade")
	require.NoError(t, res.WriteJSON(&js))
	require.Contains(t, js.String(), `"targets"`)
}
