package teardown

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/state/ledger"
)

const attemptID = "00000000-0000-4000-8000-000000000001"

var owner = dockerops.Ownership{
	AttemptID: attemptID, ExecutionLeaseID: "00000000-0000-4000-8000-000000000002",
	RunnerID: "00000000-0000-4000-8000-000000000003", RunnerInstanceID: "00000000-0000-4000-8000-000000000004",
	FencingToken: "00000000-0000-4000-8000-000000000005",
}

// fakeDocker removes one network, or fails as told.
type fakeDocker struct {
	err     error
	unknown bool   // the engine could not be listed
	message string // the action's message
	calls   int
}

func (f *fakeDocker) Teardown(_ context.Context, o dockerops.Ownership, source string) (dockerops.CleanupReport, error) {
	f.calls++
	r := dockerops.CleanupReport{ReportID: ids.NewUUID(), Source: source, Actions: []dockerops.CleanupAction{{
		DispatchAttemptID: o.AttemptID, FencingToken: o.FencingToken, RunnerInstanceID: o.RunnerInstanceID,
		ResourceType: dockerops.ResourceNetwork, ResourceID: "net", Outcome: dockerops.OutcomeRemoved, OccurredAt: time.Now().UTC(),
		Message: f.message,
	}}, RemainingUnknown: f.unknown}
	if f.err != nil {
		r.Remaining = 1
	}
	return r, f.err
}

func entry(state ledger.State) *ledger.Entry {
	return &ledger.Entry{
		SchemaVersion: ledger.SchemaVersion, AttemptID: attemptID, ExecutionLeaseID: owner.ExecutionLeaseID,
		FencingToken: owner.FencingToken, RunnerID: owner.RunnerID, RunnerInstanceID: owner.RunnerInstanceID,
		WorktreeKey: "forge/t", ExpiresAt: time.Now().Add(time.Hour).UTC(), State: state,
		Planned: []ledger.Resource{{Type: ledger.ResourceNetwork, Name: "forge-x", Role: "internal"}}, Created: []ledger.Resource{},
	}
}

func pending(t *testing.T, store ledger.Store) int {
	t.Helper()
	reports, err := store.PendingReports()
	require.NoError(t, err)
	return len(reports)
}

func TestCleanReleaseRemovesTheLedgerAfterPersistingTheReport(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	e := entry(ledger.Active)
	require.NoError(t, store.Write(*e))
	res := Release(context.Background(), &fakeDocker{}, store, Request{Owner: owner, Source: ledger.SourceTeardown, Ledger: e})
	require.NoError(t, res.Err)
	assert.False(t, res.Degraded())
	assert.True(t, res.Persisted)
	assert.True(t, res.Removed())
	assert.Equal(t, ledger.Released, res.State)
	assert.Equal(t, 1, pending(t, store))
	_, err := store.Read(attemptID)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestFailedTeardownKeepsTheLedgerDegraded(t *testing.T) {
	for name, docker := range map[string]*fakeDocker{
		"a removal failed":         {err: failure.New(failure.SandboxTeardownFailed, "a volume remains")},
		"the remainder is unknown": {unknown: true},
	} {
		t.Run(name, func(t *testing.T) {
			store := ledger.Store{Root: t.TempDir()}
			e := entry(ledger.Starting)
			require.NoError(t, store.Write(*e))
			res := Release(context.Background(), docker, store, Request{Owner: owner, Source: ledger.SourceReaper, Ledger: e})
			require.Error(t, res.Err)
			assert.True(t, res.Degraded())
			assert.Equal(t, ledger.Degraded, res.State)
			assert.Equal(t, 1, pending(t, store), "the report is durable even when the teardown failed")
			got, err := store.Read(attemptID)
			require.NoError(t, err)
			assert.Equal(t, ledger.Degraded, got.State, "kept for the reaper")
		})
	}
}

func TestWithoutALedgerOnlyTheReportIsPersisted(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	res := Release(context.Background(), &fakeDocker{}, store, Request{Owner: owner, Source: ledger.SourceTeardown})
	require.NoError(t, res.Err)
	assert.Equal(t, ledger.State(""), res.State)
	assert.Equal(t, 1, pending(t, store))
}

// An unwritable report directory degrades the release: nothing is
// acknowledged that is not durable, and the ledger stays.
func TestAReportThatCannotBePersistedDegradesTheRelease(t *testing.T) {
	root := t.TempDir()
	store := ledger.Store{Root: root}
	e := entry(ledger.Active)
	require.NoError(t, store.Write(*e))
	require.NoError(t, os.WriteFile(store.ReportDir(), []byte("not a directory"), 0o600))
	res := Release(context.Background(), &fakeDocker{}, store, Request{Owner: owner, Source: ledger.SourceTeardown, Ledger: e})
	require.Error(t, res.Err)
	assert.False(t, res.Persisted)
	assert.Equal(t, ledger.Degraded, res.State)
	got, err := store.Read(attemptID)
	require.NoError(t, err)
	assert.Equal(t, ledger.Degraded, got.State)
}

// A released ledger found again (forged stopped before removing it) is
// torn down again and removed, but never moved backwards by the table.
func TestAReleasedLedgerIsReleasedAgainWithoutGoingBackwards(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	e := entry(ledger.Released)
	require.NoError(t, store.Write(*e))
	failing := &fakeDocker{err: errors.New("engine said no")}
	res := Release(context.Background(), failing, store, Request{Owner: owner, Source: ledger.SourceReaper, Ledger: e})
	require.Error(t, res.Err)
	got, err := store.Read(attemptID)
	require.NoError(t, err)
	assert.Equal(t, ledger.Released, got.State, "released cannot become releasing or degraded")

	res = Release(context.Background(), &fakeDocker{}, store, Request{Owner: owner, Source: ledger.SourceReaper, Ledger: e})
	require.NoError(t, res.Err)
	assert.True(t, res.Removed())
}

// failingLedger is a Store whose ledger writes fail.
type failingLedger struct{ ledger.Store }

func (failingLedger) Write(ledger.Entry) error { return errors.New("disk full") }

func TestAFailedReleasingWriteDoesNotStopTheTeardown(t *testing.T) {
	store := failingLedger{ledger.Store{Root: t.TempDir()}}
	docker := &fakeDocker{}
	res := Release(context.Background(), docker, store, Request{Owner: owner, Source: ledger.SourceTeardown, Ledger: entry(ledger.Active)})
	assert.Error(t, res.ReleasingErr)
	assert.Equal(t, 1, docker.calls, "the objects are removed regardless")
	assert.NoError(t, res.Err)
	assert.False(t, res.Degraded(), "the ledger still names the attempt; nothing is lost")
}

func TestReportsAndErrorsAreRedactedLikeBuildLogs(t *testing.T) {
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
	store := ledger.Store{Root: t.TempDir()}
	docker := &fakeDocker{
		message: "remove network: Get https://forge:hunter2hunter2@registry.local/v2: GITHUB_TOKEN=" + token,
		err:     failure.New(failure.SandboxTeardownFailed, "volume in use; password=s3cr3tvalue"),
	}
	res := Release(context.Background(), docker, store, Request{Owner: owner, Source: ledger.SourceTeardown, Ledger: entry(ledger.Active)})
	require.Error(t, res.Err)
	assert.True(t, failure.Is(res.Err, failure.SandboxTeardownFailed), "the code survives redaction")
	for _, text := range []string{res.Err.Error(), res.Report.Actions[0].Message} {
		assert.NotContains(t, text, token)
		assert.NotContains(t, text, "hunter2hunter2")
		assert.NotContains(t, text, "s3cr3tvalue")
		assert.Contains(t, text, "[REDACTED]")
	}
	reports, err := store.PendingReports()
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.NotContains(t, reports[0].Actions[0].Message, token)
	raw, err := os.ReadFile(store.ReportDir() + "/" + reports[0].ReportID + ".json")
	if err == nil {
		assert.NotContains(t, string(raw), token, "nothing of the secret is on disk")
	}
}

func TestStoredReportsAreRedacted(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	r := dockerops.CleanupReport{ReportID: ids.NewUUID(), Source: ledger.SourceReaper, Actions: []dockerops.CleanupAction{{
		DispatchAttemptID: owner.AttemptID, FencingToken: owner.FencingToken, RunnerInstanceID: owner.RunnerInstanceID,
		ResourceType: dockerops.ResourceVolume, ResourceID: "v", Outcome: dockerops.OutcomeFailed, OccurredAt: time.Now().UTC(),
		Message: "Authorization: Bearer abcdefghijklmnop1234",
	}}}
	require.NoError(t, store.PersistReport(r))
	reports, err := store.PendingReports()
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.NotContains(t, reports[0].Actions[0].Message, "abcdefghijklmnop1234")
	assert.Equal(t, "Authorization: Bearer abcdefghijklmnop1234", r.Actions[0].Message, "the caller's report is not changed")
}
