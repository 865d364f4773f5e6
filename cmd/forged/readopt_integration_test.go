package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// readoptTask runs long enough for a kill -9 and a restart to land while
// it runs, commits once itself and leaves a change for the worker's commit.
const readoptTask = `echo working; sleep 10; echo done > readopt.txt; ` +
	`mkdir -p notes && echo one > notes/a.txt; echo readopt-test-end`

// following is what one attempt's stream, followed to its outcome, said.
type following struct {
	types   []string
	events  []messages.Event
	outcome *messages.AttemptOutcome
}

// follow reads the attempt's events to its outcome.
func (d *daemon) follow(attemptID string) following {
	d.t.Helper()
	var f following
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := d.api.Events(ctx, attemptID, func(ev messages.Event) error {
		f.types = append(f.types, ev.EventType)
		f.events = append(f.events, ev)
		return nil
	})
	require.NoError(d.t, err, "events %v", f.types)
	f.outcome = &out
	return f
}

// resultTree is the tree of a result commit in the host repository.
func resultTree(t *testing.T, repo, sha string) string {
	t.Helper()
	require.NotEmpty(t, sha, "no result commit")
	out, err := exec.Command("git", "-C", repo, "rev-parse", sha+"^{tree}").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// readoptDispatch is the dispatch of the re-adoption tests, on its own
// managed branch, with a fixed commit message so that two runs compare.
func readoptDispatch(t *testing.T, runnerID, repo, argv string, lease time.Duration) *messages.Dispatch {
	t.Helper()
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", argv}, Lease: lease})
	require.NoError(t, err)
	d.Task.CommitMessage = "readopt: the task's work"
	// A branch of its own: runs on one repository compare from one input.
	d.Lease.WorktreeKey = "forge/readopt-" + d.AttemptID()[:8]
	return d
}

// waitWorkerStopped waits until the engine reports the attempt's worker
// container stopped (the worker finished while no forged was there).
func waitWorkerStopped(t *testing.T, engine *client.Client, attemptHex string) {
	t.Helper()
	name := "forge-agent-" + attemptHex
	require.Eventually(t, func() bool {
		info, err := engine.ContainerInspect(context.Background(), name)
		return err == nil && info.State != nil && !info.State.Running
	}, 2*time.Minute, 200*time.Millisecond, "the worker %s did not finish", name)
}

// TestKill9WhileRunningReadoptsTheAttempt kills `forged daemon` with
// SIGKILL while the task runs, starts it again on the same state root,
// and checks that the attempt is re-adopted (sandbox_readopted), resumes
// its events without repeating those delivered before, and ends with the
// outcome and result tree of an uninterrupted run of the same task;
// nothing is left behind.
func TestKill9WhileRunningReadoptsTheAttempt(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	// The reference: the same task, uninterrupted.
	d := startDaemon(t, forged, stateRoot, lockRoot)
	reference := readoptDispatch(t, runnerID, repo, readoptTask, time.Hour)
	d.submit(reference)
	ref := d.follow(reference.AttemptID())
	require.Equal(t, messages.StatusSucceeded, ref.outcome.Status, "%s: %s", ref.outcome.Code, ref.outcome.Message)
	assert.NotContains(t, ref.types, "sandbox_readopted")

	dispatch := readoptDispatch(t, runnerID, repo, readoptTask, time.Hour)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	d.kill9()
	assertAdoptionRecord(t, stateRoot, dispatch.AttemptID())

	restarted := startDaemon(t, forged, stateRoot, lockRoot)
	defer restarted.stop()
	got := restarted.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	assert.NotContains(t, got.types, "task_started", "an event delivered before the kill is not delivered again")
	assert.Contains(t, got.types, "task_exited")
	assert.Contains(t, got.types, "output_written")
	require.Equal(t, ref.outcome.Status, got.outcome.Status, "%s: %s", got.outcome.Code, got.outcome.Message)
	assert.Equal(t, ref.outcome.Code, got.outcome.Code)
	assert.Equal(t, ref.outcome.ResultCommitCount, got.outcome.ResultCommitCount)
	require.Len(t, got.outcome.ResultCommits, len(ref.outcome.ResultCommits))
	for i := range ref.outcome.ResultCommits {
		assert.Equal(t, ref.outcome.ResultCommits[i].Subject, got.outcome.ResultCommits[i].Subject)
	}
	assert.Equal(t, resultTree(t, repo, ref.outcome.ResultCommitSHA), resultTree(t, repo, got.outcome.ResultCommitSHA),
		"the re-adopted attempt's result tree is the uninterrupted run's")
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	enginetest.AssertNoneLabelled(t, engine, reference.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// TestWorkerThatFinishedWhileDownIsCollected: the task ends while no
// forged runs; the next start re-adopts the exited worker, collects and
// imports its output as usual.
func TestWorkerThatFinishedWhileDownIsCollected(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	d := startDaemon(t, forged, stateRoot, lockRoot)
	dispatch := readoptDispatch(t, runnerID, repo, "sleep 2; echo finished > away.txt", time.Hour)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	d.kill9()
	waitWorkerStopped(t, engine, strings.ReplaceAll(dispatch.AttemptID(), "-", ""))

	restarted := startDaemon(t, forged, stateRoot, lockRoot)
	defer restarted.stop()
	got := restarted.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	assert.Contains(t, got.types, "sandbox_output_imported")
	require.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s", got.outcome.Code, got.outcome.Message)
	out, err := exec.Command("git", "-C", repo, "show", got.outcome.ResultCommitSHA+":away.txt").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "finished\n", string(out))
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// TestLeaseExpiredWhileDownIsReapedAsExpired: the lease runs out while no
// forged runs; the next start does not re-adopt the attempt: the worker
// is stopped and removed, and the outcome says the lease expired.
func TestLeaseExpiredWhileDownIsReapedAsExpired(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	d := startDaemon(t, forged, stateRoot, lockRoot)
	// The sandbox image first, so that the short lease is spent running.
	warm := readoptDispatch(t, runnerID, repo, "true", time.Hour)
	d.submit(warm)
	require.Equal(t, messages.StatusSucceeded, d.follow(warm.AttemptID()).outcome.Status)
	const lease = 20 * time.Second
	dispatch := readoptDispatch(t, runnerID, repo, "sleep 600", lease)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	d.kill9()
	// Wait out the lease (the dispatch's expiry, never renewed).
	time.Sleep(time.Until(dispatch.Lease.ExpiresAt) + time.Second)

	restarted := startDaemon(t, forged, stateRoot, lockRoot)
	defer restarted.stop()
	out := restarted.outcome(dispatch.AttemptID())
	require.NotNil(t, out, "the restarted daemon records the attempt")
	assert.Equal(t, "sandbox_readopt_lease_expired", out.Code, out.Message)
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// assertAdoptionRecord checks what the dead process left for the next: an
// active ledger with an adoption record, the control key only sealed,
// and the host key private.
func assertAdoptionRecord(t *testing.T, stateRoot, attemptID string) {
	t.Helper()
	e, err := (ledger.Store{Root: stateRoot}).Read(attemptID)
	require.NoError(t, err)
	assert.Equal(t, ledger.Active, e.State)
	require.NotNil(t, e.Adoption, "the ledger holds the adoption record")
	assert.True(t, strings.HasPrefix(e.Adoption.SealedControlKey, "v1."), "the control key is sealed")
	assert.Positive(t, e.Adoption.EventSeq, "the event sequence reached is recorded")
	assert.Equal(t, messages.WorkerProtocolVersion, e.Adoption.WorkerProtocol)
	info, err := os.Stat(filepath.Join(stateRoot, "host-key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func assertNoLedgers(t *testing.T, stateRoot string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateRoot, "ledger"))
	if err == nil {
		assert.Empty(t, entries, "no ledger is left")
	}
}

// TestDetachOnStopThenUpgradeKeepsTheAttempt: SIGTERM to a daemon started
// with --on-stop detach ends it within seconds while its attempt runs on;
// a different build of forged started on the same state root re-adopts
// the attempt, which finishes with its result.
func TestDetachOnStopThenUpgradeKeepsTheAttempt(t *testing.T) {
	engine := enginetest.Client(t)
	older := enginetest.ForgedBinary(t)
	newer := enginetest.ForgedBinaryVersion(t, "9.9.9-readopt-upgrade")
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	d := startDaemon(t, older, stateRoot, lockRoot, "--on-stop", "detach")
	dispatch := readoptDispatch(t, runnerID, repo, readoptTask, time.Hour)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	stopped := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "a detached daemon exits cleanly")
	case <-time.After(20 * time.Second):
		d.kill9()
		t.Fatal("the daemon did not exit within 20 s of SIGTERM in detach mode")
	}
	t.Logf("detached in %s", time.Since(stopped).Round(time.Millisecond))
	info, err := engine.ContainerInspect(ctx, "forge-agent-"+strings.ReplaceAll(dispatch.AttemptID(), "-", ""))
	require.NoError(t, err, "the worker is left in place")
	require.True(t, info.State.Running, "the worker still runs after the daemon detached")

	upgraded := startDaemon(t, newer, stateRoot, lockRoot)
	defer upgraded.stop()
	got := upgraded.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	require.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s", got.outcome.Code, got.outcome.Message)
	out, err := exec.Command("git", "-C", repo, "show", got.outcome.ResultCommitSHA+":readopt.txt").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "done\n", string(out))
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// TestOnStopRefusesAnUnknownMode: the setting names itself.
func TestOnStopRefusesAnUnknownMode(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	out, err := exec.Command(forged, "daemon", "--on-stop", "linger", "--state-root", t.TempDir()).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `--on-stop "linger" is neither drain nor detach`)
	// The same setting as a FORGED_* variable and as a config key.
	cmd := exec.Command(forged, "daemon", "--state-root", t.TempDir())
	cmd.Env = append(os.Environ(), "FORGED_ON_STOP=linger")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `"linger" is neither drain nor detach`)
	file := filepath.Join(t.TempDir(), "forged.yaml")
	require.NoError(t, os.WriteFile(file, []byte("onStop: linger\n"), 0o600))
	out, err = exec.Command(forged, "daemon", "--config", file, "--state-root", t.TempDir()).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `"linger" is neither drain nor detach`)
}
