package actors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// adoptable writes what a live attempt leaves for a restarted forged: its
// state file and a ledger entry whose adoption record matches it.
func adoptable(t *testing.T) (root string, hostKey []byte, e ledger.Entry) {
	t.Helper()
	return adoptableWith(t, "version: 1\nworkingDirectory: /workspace\ncaches: []\n", nil)
}

// adoptableWith is adoptable for an attempt of the contract source, its
// dispatch changed by mutate (when not nil).
func adoptableWith(t *testing.T, contractSource string, mutate func(*messages.Dispatch)) (root string, hostKey []byte, e ledger.Entry) {
	t.Helper()
	root = t.TempDir()
	store := ledger.Store{Root: root}
	hostKey, err := store.HostKey()
	require.NoError(t, err)
	d, err := example.NewDispatch(example.DispatchOptions{RunnerID: example.NewUUID(), RepoPath: "/srv/repo"})
	require.NoError(t, err)
	if mutate != nil {
		mutate(d)
	}
	source := []byte(contractSource)
	parsed, err := contract.Parse(source)
	require.NoError(t, err)
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	workDir := attemptWorkDir(root, names.AttemptHex)
	require.NoError(t, os.MkdirAll(workDir, 0o700))
	prepared := &gitops.Prepared{InputCommitSHA: strings.Repeat("a", 40), ConfigCommitSHA: strings.Repeat("b", 40), ContractSource: source,
		ContextDigest: strings.Repeat("c", 64)}
	digest, err := writeAdoptionState(workDir, d, prepared, []string{"no-new-privileges"})
	require.NoError(t, err)
	sealed, err := ledger.Seal(hostKey, []byte("the-control-key"), d.AttemptID())
	require.NoError(t, err)
	e = ledger.Entry{
		SchemaVersion: ledger.SchemaVersion, AttemptID: d.AttemptID(), ExecutionLeaseID: d.Sandbox.ExecutionLeaseID,
		FencingToken: d.Lease.FencingToken, RunnerID: d.Execution.RunnerID, RunnerInstanceID: d.Sandbox.RunnerInstanceID,
		WorktreeKey: d.Lease.WorktreeKey, ExpiresAt: d.Lease.ExpiresAt, State: ledger.Active,
		Adoption: &ledger.Adoption{WorkerProtocol: messages.WorkerProtocolVersion, ContainerID: "c0ffee", Image: "sha256:" + strings.Repeat("1", 64),
			InputCommitSHA: prepared.InputCommitSHA, ContractDigest: parsed.Digest, StateDigest: digest, SealedControlKey: sealed,
			WorkerCreatedAt: time.Now().UTC(), PublicationMode: d.Sandbox.PublicationMode, EventSeq: 3,
			User: messages.SandboxUser{UID: 100002, GID: 100002}},
	}
	require.NoError(t, store.Write(e))
	return root, hostKey, e
}

func TestLoadAdoptionRestoresTheAttempt(t *testing.T) {
	root, key, e := adoptable(t)
	ad, err := LoadAdoption(root, e, key)
	require.NoError(t, err)
	assert.Equal(t, e.AttemptID, ad.Dispatch.AttemptID())
	assert.Equal(t, "the-control-key", ad.controlKey)
	assert.Equal(t, e.Adoption.ContractDigest, ad.contract.Digest)
	assert.Equal(t, e.Adoption.InputCommitSHA, ad.prepared.InputCommitSHA)
	assert.Equal(t, []string{"no-new-privileges"}, ad.security)
	assert.Equal(t, messages.SandboxUser{UID: 100002, GID: 100002}, ad.User(), "the adopted attempt keeps its slot's uid")
}

// The ledger's adoption record carries the attempt's sandbox user, so a
// restarted forged re-adopts it as the same uid.
func TestAdoptionRecordCarriesTheSandboxUser(t *testing.T) {
	a := &attemptActor{cfg: AttemptConfig{User: messages.SandboxUser{UID: 100004, GID: 100004}}, d: actortest.NewDispatch(time.Now().Add(time.Hour))}
	a.worker.containerID, a.worker.sealedKey, a.in.stateDigest = "c0ffee", "v1.sealed", "sha256:"+strings.Repeat("3", 64)
	a.in.prepared = &gitops.Prepared{InputCommitSHA: strings.Repeat("a", 40)}
	a.in.contract = &contract.Parsed{Digest: "sha256:" + strings.Repeat("2", 64)}
	rec := a.adoptionRecord()
	require.NotNil(t, rec)
	assert.Equal(t, a.cfg.User, rec.User)
}

// TestLoadAdoptionRefusesWhatDoesNotCheckOut: every way the state file,
// the ledger and the host key can disagree ends in
// sandbox_readopt_ledger_damaged, never in an adopted attempt.
func TestLoadAdoptionRefusesWhatDoesNotCheckOut(t *testing.T) {
	cases := map[string]func(t *testing.T, root string, key *[]byte, e *ledger.Entry){
		"the state file was edited": func(t *testing.T, root string, _ *[]byte, e *ledger.Entry) {
			path := stateFile(t, root, e.AttemptID)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "forge/", "forge/x", 1)), 0o600))
		},
		"the state file is gone": func(t *testing.T, root string, _ *[]byte, e *ledger.Entry) {
			require.NoError(t, os.Remove(stateFile(t, root, e.AttemptID)))
		},
		"the state file is a link": func(t *testing.T, root string, _ *[]byte, e *ledger.Entry) {
			path := stateFile(t, root, e.AttemptID)
			require.NoError(t, os.Rename(path, path+".real"))
			require.NoError(t, os.Symlink(path+".real", path))
		},
		"another host key": func(_ *testing.T, _ string, key *[]byte, _ *ledger.Entry) {
			*key = make([]byte, 32)
		},
		"a key sealed for another attempt": func(t *testing.T, _ string, key *[]byte, e *ledger.Entry) {
			sealed, err := ledger.Seal(*key, []byte("k"), example.NewUUID())
			require.NoError(t, err)
			e.Adoption.SealedControlKey = sealed
		},
		"another fence in the ledger": func(_ *testing.T, _ string, _ *[]byte, e *ledger.Entry) {
			e.FencingToken = example.NewUUID()
		},
		"another input commit": func(_ *testing.T, _ string, _ *[]byte, e *ledger.Entry) {
			e.Adoption.InputCommitSHA = strings.Repeat("d", 40)
		},
		"another contract": func(_ *testing.T, _ string, _ *[]byte, e *ledger.Entry) {
			e.Adoption.ContractDigest = "sha256:" + strings.Repeat("9", 64)
		},
		"no adoption record": func(_ *testing.T, _ string, _ *[]byte, e *ledger.Entry) {
			e.Adoption = nil
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			root, key, e := adoptable(t)
			spoil(t, root, &key, &e)
			_, err := LoadAdoption(root, e, key)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxReadoptLedgerDamaged, failure.CodeOf(err), "%v", err)
		})
	}
}

func stateFile(t *testing.T, root, attemptID string) string {
	names, err := dockerops.NamesFor(attemptID)
	require.NoError(t, err)
	return filepath.Join(attemptWorkDir(root, names.AttemptHex), adoptionStateFile)
}

// TestHeldEventsKeepTheirOrder: with a host key (a re-adoptable attempt),
// worker events wait for the ledger write that records them; the stream
// the subscriber sees is the same, in the same order, as without one, and
// the ledger recorded the sequence reached and the worker's exit.
func TestHeldEventsKeepTheirOrder(t *testing.T) {
	run := func(hostKey []byte) []string {
		host := newFakeHost(t.TempDir())
		host.workerEvents = []messages.Event{
			messages.RunnerEvent(workerStartedEvent, "up", nil),
			messages.RunnerEvent("task_started", "go", nil),
			messages.RunnerEvent("task_exited", "done", nil),
			messages.RunnerEvent(outputWrittenEvent, "written", nil),
		}
		h := newHarnessWith(t, host, nil, func(cfg *AttemptConfig) { cfg.HostKey = hostKey })
		probe := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
		out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
		require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
		return eventTypes(probe)
	}
	key := make([]byte, 32)
	held := run(key)
	assert.Equal(t, run(nil), held)
	assert.Contains(t, held, "task_exited")
}
