package reaper

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
)

// world is one runner's view: its store, a fake engine and a fixed clock.
type world struct {
	t        *testing.T
	store    ledger.Store
	docker   *fakeDocker
	runner   string
	instance string
	now      time.Time
}

func newWorld(t *testing.T) *world {
	return &world{
		t:        t,
		store:    ledger.Store{Root: t.TempDir()},
		docker:   &fakeDocker{failing: map[string]bool{}},
		runner:   uuid(),
		instance: uuid(),
		now:      time.Date(2030, 6, 1, 12, 0, 0, 500_000_000, time.UTC),
	}
}

func (w *world) config() Config {
	return Config{RunnerID: w.runner, RunnerInstanceID: w.instance, Now: func() time.Time { return w.now }}
}

// dead is an attempt of a previous instance of this runner whose lease
// has not expired.
func (w *world) dead() attempt { return newAttempt(w.runner, uuid(), w.now.Add(time.Hour)) }

// mine is an attempt of this very process.
func (w *world) mine() attempt { return newAttempt(w.runner, w.instance, w.now.Add(time.Hour)) }

func (w *world) run(cfg Config) Round {
	w.t.Helper()
	round, err := Run(context.Background(), cfg, w.store, w.docker)
	require.NoError(w.t, err)
	return round
}

func (w *world) ledgerState(attemptID string) (ledger.State, bool) {
	e, err := w.store.Read(attemptID)
	if err != nil {
		return "", false
	}
	return e.State, true
}

func TestReapsLedgerOfDeadInstance(t *testing.T) {
	w := newWorld(t)
	a := w.dead()
	w.docker.add(a.objects(w.now.Add(-time.Second))...) // young: a ledger reap ignores the grace
	require.NoError(t, w.store.Write(a.entry(ledger.Active)))

	round := w.run(w.config())
	require.Equal(t, []string{a.owner.AttemptID}, round.Reaped)
	require.Equal(t, []any{a.owner}, toAny(w.docker.teardowns))
	require.Equal(t, []string{"ctr-" + a.owner.AttemptID[:8], "net-" + a.owner.AttemptID[:8], "forge-" + a.owner.AttemptID[:8] + "-workspace"}, w.docker.removed)
	_, exists := w.ledgerState(a.owner.AttemptID)
	require.False(t, exists, "the ledger is removed once the report is stored")

	pending, err := w.store.PendingReports()
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, ledger.SourceReaper, pending[0].Source)
	require.Equal(t, pending, round.Reports)
}

func toAny[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func TestLedgerKeptWhenReportCannotBeStored(t *testing.T) {
	w := newWorld(t)
	a := w.dead()
	w.docker.add(a.objects(w.now.Add(-time.Hour))...)
	require.NoError(t, w.store.Write(a.entry(ledger.Active)))
	// A file where the report directory should be: reports cannot be stored.
	require.NoError(t, os.WriteFile(filepath.Join(w.store.Root, "cleanup-reports"), nil, 0o600))

	round, err := Run(context.Background(), w.config(), w.store, w.docker)
	require.Error(t, err)
	require.Empty(t, round.Reaped)
	require.Equal(t, []string{a.owner.AttemptID}, round.Degraded)
	state, exists := w.ledgerState(a.owner.AttemptID)
	require.True(t, exists, "without a stored report the ledger must stay")
	require.Equal(t, ledger.Degraded, state)
}

func TestLedgerDecisions(t *testing.T) {
	w := newWorld(t)
	current := w.mine()
	expired := newAttempt(w.runner, w.instance, w.now.Add(-time.Minute))
	degraded := w.mine()
	released := w.mine()
	foreign := newAttempt(uuid(), uuid(), w.now.Add(-time.Hour))
	for _, a := range []attempt{current, expired, degraded, released, foreign} {
		w.docker.add(a.objects(w.now.Add(-time.Hour))...)
	}
	require.NoError(t, w.store.Write(current.entry(ledger.Active)))
	require.NoError(t, w.store.Write(expired.entry(ledger.Starting)))
	require.NoError(t, w.store.Write(degraded.entry(ledger.Degraded)))
	require.NoError(t, w.store.Write(released.entry(ledger.Released)))
	require.NoError(t, w.store.Write(foreign.entry(ledger.Active)))

	round := w.run(w.config())
	require.ElementsMatch(t, []string{expired.owner.AttemptID, degraded.owner.AttemptID, released.owner.AttemptID}, round.Reaped)
	require.Empty(t, round.Degraded)

	state, exists := w.ledgerState(current.owner.AttemptID)
	require.True(t, exists)
	require.Equal(t, ledger.Active, state)
	_, exists = w.ledgerState(foreign.owner.AttemptID)
	require.True(t, exists, "another runner's ledger is never acted on")
	for _, o := range append(current.objects(time.Time{}), foreign.objects(time.Time{})...) {
		require.True(t, w.docker.has(o.ID), "%s must stay", o.ID)
	}
	require.Contains(t, round.Skipped, Skip{AttemptID: current.owner.AttemptID, Reason: SkipLeaseCurrent})
	require.Contains(t, round.Skipped, Skip{AttemptID: foreign.owner.AttemptID, Reason: SkipForeignRunner})
}

func TestSnapshotDecidesOwnInstanceLedgers(t *testing.T) {
	w := newWorld(t)
	held := w.mine()
	forgotten := w.mine()
	fenced := w.mine()
	for _, a := range []attempt{held, forgotten, fenced} {
		require.NoError(t, w.store.Write(a.entry(ledger.Active)))
	}
	cfg := w.config()
	cfg.SnapshotAvailable = true
	cfg.ServerSnapshot = []ServerAttempt{
		{AttemptID: held.owner.AttemptID, FencingToken: held.owner.FencingToken, RunnerInstanceID: w.instance, ExpiresAt: w.now.Add(time.Minute)},
		{AttemptID: fenced.owner.AttemptID, FencingToken: uuid(), RunnerInstanceID: w.instance, ExpiresAt: w.now.Add(time.Minute)},
	}
	round := w.run(cfg)
	require.ElementsMatch(t, []string{forgotten.owner.AttemptID, fenced.owner.AttemptID}, round.Reaped)
	_, exists := w.ledgerState(held.owner.AttemptID)
	require.True(t, exists)
}

func TestLiveAttemptIsNeverTouched(t *testing.T) {
	w := newWorld(t)
	withLedger := w.dead() // would be reaped, were it not live
	withLabels := w.dead()
	w.docker.add(withLedger.objects(w.now.Add(-time.Hour))...)
	w.docker.add(withLabels.objects(w.now.Add(-time.Hour))...)
	expired := withLedger.entry(ledger.Active)
	expired.ExpiresAt = w.now.Add(-time.Hour)
	require.NoError(t, w.store.Write(expired))

	cfg := w.config()
	cfg.SnapshotAvailable = true // the server forgot both
	cfg.Live = func(id string) bool { return id == withLedger.owner.AttemptID || id == withLabels.owner.AttemptID }
	round := w.run(cfg)

	require.Empty(t, round.Reaped)
	require.Empty(t, round.Removed)
	require.Empty(t, w.docker.teardowns)
	require.Empty(t, w.docker.removed)
	state, exists := w.ledgerState(withLedger.owner.AttemptID)
	require.True(t, exists)
	require.Equal(t, ledger.Active, state, "not even the ledger is rewritten")
}

func TestFailedRemovalLeavesDegradedLedgerAndIsRetried(t *testing.T) {
	w := newWorld(t)
	a := w.dead()
	objs := a.objects(w.now.Add(-time.Hour))
	w.docker.add(objs...)
	w.docker.failing["ctr-"+a.owner.AttemptID[:8]] = true
	require.NoError(t, w.store.Write(a.entry(ledger.Active)))

	round := w.run(w.config())
	require.Empty(t, round.Reaped)
	require.Equal(t, []string{a.owner.AttemptID}, round.Degraded)
	state, exists := w.ledgerState(a.owner.AttemptID)
	require.True(t, exists, "the ledger is kept")
	require.Equal(t, ledger.Degraded, state)
	require.True(t, w.docker.has("ctr-"+a.owner.AttemptID[:8]))

	pending, err := w.store.PendingReports()
	require.NoError(t, err)
	require.Len(t, pending, 2, "the teardown's report and the label retry's report are both stored")
	failedActions := 0
	for _, r := range pending {
		for _, act := range r.Actions {
			if act.Outcome == ledger.OutcomeFailed {
				failedActions++
				require.NotContains(t, act.Message, "\n")
			}
		}
	}
	require.Equal(t, 2, failedActions)

	// Next round, the engine cooperates: the degraded ledger is reaped.
	delete(w.docker.failing, "ctr-"+a.owner.AttemptID[:8])
	round = w.run(w.config())
	require.Equal(t, []string{a.owner.AttemptID}, round.Reaped)
	require.Empty(t, round.Degraded)
	_, exists = w.ledgerState(a.owner.AttemptID)
	require.False(t, exists)
	require.False(t, w.docker.has("ctr-"+a.owner.AttemptID[:8]))
}

func TestCorruptLedgerIsReportedAndKept(t *testing.T) {
	w := newWorld(t)
	dir := w.store.LedgerDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	path := filepath.Join(dir, "0123456789abcdef0123456789abcdef.json")
	require.NoError(t, os.WriteFile(path, []byte("{garbage"), 0o600))

	round := w.run(w.config())
	require.Len(t, round.Corrupt, 1)
	require.Equal(t, path, round.Corrupt[0].Path)
	_, err := os.Stat(path)
	require.NoError(t, err)
}

func TestInvalidConfigAndListFailure(t *testing.T) {
	w := newWorld(t)
	cfg := w.config()
	cfg.RunnerInstanceID = "instance-1"
	_, err := Run(context.Background(), cfg, w.store, w.docker)
	require.True(t, failure.Is(err, CodeConfigInvalid))

	a := w.dead()
	require.NoError(t, w.store.Write(a.entry(ledger.Active)))
	w.docker.listErr = os.ErrDeadlineExceeded
	round, err := Run(context.Background(), w.config(), w.store, w.docker)
	require.True(t, failure.Is(err, CodeListFailed), "%v", err)
	require.Equal(t, []string{a.owner.AttemptID}, round.Reaped, "the ledger phase still ran")
}
