package fleet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/messages"
)

// TestFleetMemberThatReturnsWithinTheGraceIsFollowedOn: a member killed
// (SIGKILL) mid-attempt and started again on the same state root within
// its submitter's return grace re-adopts the attempt, and the submitter
// follows it on under the member's new cluster id: the attempt ends once,
// succeeded, with its result, its events proxied across the restart; it
// is never declared lost. The submitter's grace is long here (2 min) so
// that a slow restart on a loaded machine cannot decide the test.
func TestFleetMemberThatReturnsWithinTheGraceIsFollowedOn(t *testing.T) {
	engine := enginetest.Client(t)
	f := &testFleet{t: t, forged: enginetest.ForgedFleetBinary(t), etcd: etcdtest.Start(t), ca: newTestCA(t), name: fleetName()}
	notRaceBuilt(t, f.forged)
	submitter := f.newMember(1, "--fleet-return-grace", "2m")
	f.members = append(f.members, submitter)
	runs := f.newMember(1)
	f.members = append(f.members, runs)
	f.waitDirectory(2*time.Minute, submitter, runs)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo := exampleRepo(ctx, t)
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runs.runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "sleep 15; echo back > back.txt"}, Timeout: 300, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d.Lease.WorktreeKey = "forge/rejoin-" + d.AttemptID()[:8]
	t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
	if _, err := submitter.api.Submit(ctx, d); err != nil {
		t.Fatalf("submit naming the other member: %v", err)
	}
	submitter.waitStarted(ctx, d.AttemptID())

	runs.kill9()
	killed := time.Now()
	runs.start(t, runs.args...)
	t.Logf("the member was killed and answered again %s later", time.Since(killed).Round(time.Millisecond))

	out, types, err := submitter.outcome(ctx, d.AttemptID())
	if err != nil || out.Status != messages.StatusSucceeded || out.ResultCommitSHA == "" {
		t.Fatalf("through the submitter the attempt ended %+v, %v; events %v; want succeeded with a result", out, err, types)
	}
	if !slices.Contains(types, "sandbox_readopted") {
		t.Fatalf("the events proxied across the restart lack the re-adoption: %v", types)
	}
	if got := branchAt(t, repo, d.Lease.WorktreeKey); got != out.ResultCommitSHA {
		t.Fatalf("the managed branch is at %q; want the result %s", got, out.ResultCommitSHA)
	}
	t.Logf("followed on across the restart: %s, %d events, %s after the kill", out.Status, len(types), time.Since(killed).Round(time.Millisecond))
	runs.stop()
	submitter.stop()
}
