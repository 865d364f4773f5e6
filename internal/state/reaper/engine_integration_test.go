package reaper

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// TestEngineRoundTouchesOnlyItsRunner runs on the real engine (skipped
// when none answers, failed under CI=true): runner A's dead attempts are
// reaped, by ledger and by label, while runner B's objects and a live
// attempt of A stay; a dry run before removes nothing.
func TestEngineRoundTouchesOnlyItsRunner(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ops, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ops.Close() })

	now := time.Now()
	runnerA, runnerB := uuid(), uuid()
	current, deadInstance := uuid(), uuid()
	byLedger := newAttempt(runnerA, deadInstance, now.Add(time.Hour))
	byLabel := newAttempt(runnerA, deadInstance, now.Add(-time.Minute))
	live := newAttempt(runnerA, current, now.Add(time.Hour))
	other := newAttempt(runnerB, uuid(), now.Add(-time.Hour))
	for _, a := range []attempt{byLedger, byLabel, live, other} {
		createObjects(ctx, t, engine, a)
	}
	store := ledger.Store{Root: t.TempDir()}
	require.NoError(t, store.Write(byLedger.entry(ledger.Active)))
	time.Sleep(1100 * time.Millisecond) // engines report creation to the second

	docker := ops
	cfg := Config{
		RunnerID:         runnerA,
		RunnerInstanceID: current,
		Grace:            NoGrace,
		Live:             func(id string) bool { return id == live.owner.AttemptID },
	}

	dry := cfg
	dry.DryRun = true
	round, err := Run(ctx, dry, store, docker)
	require.NoError(t, err)
	require.Equal(t, []string{byLedger.owner.AttemptID}, round.WouldReap)
	require.Len(t, round.WouldRemove, 4, "the ledger attempt's and the labelled attempt's network and volume")
	for _, a := range []attempt{byLedger, byLabel, live, other} {
		require.Len(t, labelled(t, engine, a), 2, "a dry run removes nothing")
	}
	_, err = store.Read(byLedger.owner.AttemptID)
	require.NoError(t, err)

	round, err = Run(ctx, cfg, store, docker)
	require.NoError(t, err)
	require.Equal(t, []string{byLedger.owner.AttemptID}, round.Reaped)
	require.Empty(t, round.Degraded)
	require.ElementsMatch(t, []string{KindNetwork, KindVolume}, kinds(round.Removed))
	require.Empty(t, labelled(t, engine, byLedger))
	require.Empty(t, labelled(t, engine, byLabel))
	require.Len(t, labelled(t, engine, live), 2, "a live attempt is never touched")
	require.Len(t, labelled(t, engine, other), 2, "another runner's objects are never touched")

	_, err = store.Read(byLedger.owner.AttemptID)
	require.Error(t, err, "the reaped ledger is removed")
	pending, err := store.PendingReports()
	require.NoError(t, err)
	require.Len(t, pending, 2, "the ledger teardown's report and the label phase's")
}

// createObjects creates an internal network and a volume labelled for the
// attempt, removed when the test ends.
func createObjects(ctx context.Context, t *testing.T, engine *client.Client, a attempt) {
	t.Helper()
	name := "forged-reaper-test-" + a.owner.AttemptID[:13]
	_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: a.labels()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = engine.VolumeRemove(context.Background(), name, true) })
	created, err := engine.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: a.labels()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = engine.NetworkRemove(context.Background(), created.ID) })
}

// labelled lists what still carries the attempt's label.
func labelled(t *testing.T, engine *client.Client, a attempt) []string {
	return enginetest.Labelled(t, engine, dockerops.LabelAttemptID+"="+a.owner.AttemptID)
}

// kinds lists the objects' kinds.
func kinds(objs []Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Kind
	}
	return out
}
