package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
)

// TestReapNowTakesTheServersSnapshot: a requested round given the
// server's snapshot keeps the attempts the server holds (same attempt,
// fence and instance, unexpired) and reaps the rest, whatever their
// ledger's own lease says; without one, a current lease is kept. Every
// round also collects the stored build logs and attestations by the
// seed's retention.
func TestReapNowTakesTheServersSnapshot(t *testing.T) {
	sys := actortest.NewSystem(t)
	system := sys.ActorSystem
	const runner, instance = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
	state := t.TempDir()
	store := ledger.Store{Root: state}
	now := sys.Clock.Now()
	e := ledger.Entry{
		SchemaVersion: ledger.SchemaVersion, AttemptID: "00000000-0000-4000-8000-0000000000a1", ExecutionLeaseID: "00000000-0000-4000-8000-0000000000a2",
		FencingToken: "00000000-0000-4000-8000-0000000000a3", RunnerID: runner, RunnerInstanceID: instance, WorktreeKey: "forge/t",
		ExpiresAt: now.Add(time.Hour), State: ledger.Active, Planned: []ledger.Resource{}, Created: []ledger.Resource{},
	}
	require.NoError(t, store.Write(e))
	// An expired attestation directory and a fresh build log.
	old := now.Add(-30 * 24 * time.Hour)
	attestation := filepath.Join(state, "attestations", strings.Repeat("a", 64))
	buildLog := filepath.Join(state, "build-logs", strings.Repeat("b", 64))
	for _, dir := range []string{attestation, buildLog} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	require.NoError(t, os.Chtimes(attestation, old, old))
	require.NoError(t, os.Chtimes(buildLog, now, now))

	pid := sys.Spawn(newReaperProps(ReaperConfig{
		Store: store, Docker: emptyEngine{}, Interval: time.Hour,
		Round: reaper.Config{RunnerID: runner, RunnerInstanceID: instance, Audit: &reaper.AuditRetention{StateRoot: state}},
	}, newLiveSet(), sys.Clock))
	reap := func(msg ReapNow) reaper.Round {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, msg, 10*time.Second).Result()
		require.NoError(t, err)
		require.NoError(t, res.(ReapResult).Err)
		return res.(ReapResult).Round
	}
	held := reaper.ServerAttempt{AttemptID: e.AttemptID, FencingToken: e.FencingToken, RunnerInstanceID: instance, ExpiresAt: now.Add(time.Hour)}

	round := reap(ReapNow{DryRun: true})
	assert.Empty(t, round.WouldReap, "without a snapshot, a current lease is kept")
	require.NotNil(t, round.Audit)
	require.Len(t, round.Audit.Removed, 1, "a dry run says which audit artifacts would go")
	assert.Equal(t, "attestations", round.Audit.Removed[0].Dir)
	assert.DirExists(t, attestation, "a dry run removes nothing")

	round = reap(ReapNow{DryRun: true, Snapshot: &reaper.Snapshot{Attempts: []reaper.ServerAttempt{held}}})
	assert.Empty(t, round.WouldReap, "the server holds it")

	fenced := held
	fenced.FencingToken = "00000000-0000-4000-8000-0000000000ff"
	round = reap(ReapNow{DryRun: true, Snapshot: &reaper.Snapshot{Attempts: []reaper.ServerAttempt{fenced}}})
	assert.Equal(t, []string{e.AttemptID}, round.WouldReap, "the server holds it under another fence")

	expired := held
	expired.ExpiresAt = now.Add(-time.Second)
	round = reap(ReapNow{DryRun: true, Snapshot: &reaper.Snapshot{Attempts: []reaper.ServerAttempt{expired}}})
	assert.Equal(t, []string{e.AttemptID}, round.WouldReap, "the server's lease expired")

	round = reap(ReapNow{Snapshot: &reaper.Snapshot{Attempts: []reaper.ServerAttempt{}}})
	assert.Equal(t, []string{e.AttemptID}, round.Reaped, "an empty snapshot: the server holds nothing")
	_, err := store.Read(e.AttemptID)
	assert.Error(t, err, "the reaped ledger is gone")
	assert.NoDirExists(t, attestation, "the expired attestation is purged")
	assert.DirExists(t, buildLog, "the fresh build log stays")
}
