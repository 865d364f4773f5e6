package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// envInt reads a positive integer from the environment, else def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	require.NoError(t, err, "%s", name)
	require.Positive(t, n, "%s", name)
	return n
}

// TestChaosLoopKill9DuringABurst submits a burst of attempts and kills
// `forged daemon` with SIGKILL at random moments while they run (queued,
// building, running, collecting, publishing: wherever the kill lands),
// starting it again each time on the same state root. A client follows
// every attempt across the restarts (client.Follow). Every attempt must
// end exactly once, with an outcome (succeeded, or failed with a code),
// its events numbered 1…N with none repeated or skipped; nothing leaks.
// The suite runs the short form (5 restarts over a burst of 4);
// scripts/soak.sh the full one (FORGED_CHAOS_RESTARTS=20,
// FORGED_CHAOS_BURST=10). FORGED_CHAOS_SEED replays a run's kill times.
func TestChaosLoopKill9DuringABurst(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	restarts := envInt(t, "FORGED_CHAOS_RESTARTS", 5)
	burst := envInt(t, "FORGED_CHAOS_BURST", 4)
	seed := uint64(time.Now().UnixNano())
	if raw := os.Getenv("FORGED_CHAOS_SEED"); raw != "" {
		var err error
		seed, err = strconv.ParseUint(raw, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("FORGED_CHAOS_SEED=%d (%d restarts over a burst of %d)", seed, restarts, burst)
	rng := rand.New(rand.NewPCG(seed, seed))

	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	d := startDaemon(t, forged, stateRoot, lockRoot)
	// The sandbox image first, so that the kills land in every phase, not
	// only in the first build.
	warm := readoptDispatch(t, runnerID, repo, "true", time.Hour)
	d.submit(warm)
	require.Equal(t, messages.StatusSucceeded, d.follow(warm.AttemptID()).outcome.Status)
	var dispatches []*messages.Dispatch
	var followed []<-chan followedAcross
	for i := range burst {
		dispatch := readoptDispatch(t, runnerID, repo, fmt.Sprintf("echo burst %d; sleep %d; echo %d > chaos.txt", i, 2+i%4, i), time.Hour)
		d.submit(dispatch)
		dispatches = append(dispatches, dispatch)
		followed = append(followed, followAcross(t, d.socket, dispatch.AttemptID()))
	}
	for range restarts {
		time.Sleep(time.Duration(500+rng.IntN(3000)) * time.Millisecond) // the kill lands where it lands
		d.kill9()
		d = startDaemon(t, forged, stateRoot, lockRoot)
	}
	defer d.stop()

	outcomes := map[string]int{}
	for i, done := range followed {
		id := dispatches[i].AttemptID()
		var got followedAcross
		select {
		case got = <-done:
		case <-time.After(5 * time.Minute):
			t.Fatalf("attempt %s did not end", id)
		}
		require.NoError(t, got.err, "attempt %s: events %v", id, got.types)
		for j, seq := range got.seqs {
			require.Equal(t, j+1, seq, "attempt %s: every event once, in sequence: %v", id, got.seqs)
		}
		out := got.outcome
		switch out.Status {
		case messages.StatusSucceeded:
		case messages.StatusFailed:
			assert.NotEmpty(t, out.Code, "attempt %s failed without a code: %s", id, out.Message)
		default:
			t.Errorf("attempt %s ended %s (%s): %s", id, out.Status, out.Code, out.Message)
		}
		t.Logf("attempt %s: %s %s: %s", id, out.Status, out.Code, out.Message)
		outcomes[out.Status+" "+out.Code]++
		if slices.Contains(got.types, "sandbox_readopted") {
			outcomes["re-adopted"]++
		}
		// The daemon serves the same, whole log: one outcome, recorded once.
		whole := d.follow(id)
		assert.Equal(t, got.types, whole.types, "attempt %s", id)
		assert.Equal(t, out.FinishedAt, whole.outcome.FinishedAt, "attempt %s has one outcome", id)
		enginetest.AssertNoneLabelled(t, engine, id)
	}
	t.Logf("outcomes: %v", outcomes)
	list, err := d.api.Attempts(d.callCtx(), messages.AttemptStateRunning, 0)
	require.NoError(t, err)
	assert.Empty(t, list.Attempts, "no attempt is left running")
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
	for _, dir := range []string{"attempts", "quarantine"} {
		entries, err := os.ReadDir(filepath.Join(stateRoot, dir))
		if err == nil {
			assert.Empty(t, entries, "STATE_ROOT/%s holds nothing", dir)
		}
	}
}
