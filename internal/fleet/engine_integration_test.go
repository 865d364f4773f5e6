package fleet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
)

// realRunner starts a runner on the real engine with a state root, a lock
// root and so a runner id of its own, one slot.
func realRunner(t *testing.T) *runner.Runner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, runner.Config{
		Slots: 1, StateRoot: t.TempDir(), LockRoot: t.TempDir(), WorkerBinary: workerbin.Path(t),
		AllowRootful: true, Capacity: example.SmallHostCapacity(),
	})
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestRealFleetRunsADispatchWhereItsRunnerIDPoints: three members on the
// real engine and a real etcd, each with its own state root, lock root and
// runner id. A dispatch submitted through the first member's API runner
// (fleet.Routed) and naming the third runs on the third, not on the
// others; its events and outcome reach the first member's log; nothing of
// it remains.
func TestRealFleetRunsADispatchWhereItsRunnerIDPoints(t *testing.T) {
	engine := enginetest.Client(t)
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	name := fleetName()
	var runners []*runner.Runner
	var members []*fleet.Member
	for i := range 3 {
		r := realRunner(t)
		runners = append(runners, r)
		members = append(members, join(t, ca.config(t, etcd.Endpoint(), name, fmt.Sprintf("m%d", i)), r))
	}
	for _, m := range members {
		waitDirectory(t, m, 30*time.Second, runners[0].RunnerID(), runners[1].RunnerID(), runners[2].RunnerID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := example.BuildBaseImage(ctx, runners[2].Docker(), "/bin/busybox"); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	if err := example.CreateRepo(ctx, repo, example.RepoOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runners[2].RunnerID(), RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "echo ran-on-the-third > where.txt"}, Timeout: 120})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })

	api := fleet.Routed{Runner: runners[0], Member: members[0]}
	reply, err := api.Submit(d)
	if err != nil || !reply.Accepted {
		t.Fatalf("submit through the first member: %+v, %v", reply, err)
	}
	ranOn, ok := runners[2].Logs().Get(d.AttemptID())
	if !ok {
		t.Fatal("the third member has no log of the attempt")
	}
	if _, ok := runners[1].Logs().Get(d.AttemptID()); ok {
		t.Fatal("the second member logged an attempt naming the third")
	}
	proxied, ok := runners[0].Logs().Get(d.AttemptID())
	if !ok {
		t.Fatal("the first member proxies no log of the attempt")
	}
	out, err := proxied.Wait(ctx)
	if err != nil || out.Status != messages.StatusSucceeded {
		t.Fatalf("proxied outcome %+v, %v; events %v", out, err, proxied.Events())
	}
	there, err := ranOn.Wait(ctx)
	if err != nil || there.Status != out.Status || there.ResultCommitSHA != out.ResultCommitSHA || there.AttemptID != out.AttemptID {
		t.Fatalf("outcome on the third %+v, %v; proxied %+v", there, err, out)
	}
	if len(proxied.Events()) != len(ranOn.Events()) || len(proxied.Events()) == 0 {
		t.Fatalf("proxied %d events, the third logged %d", len(proxied.Events()), len(ranOn.Events()))
	}
	t.Logf("ran on the third member: %s, result %s, %d events proxied", out.Status, out.ResultCommitSHA, len(proxied.Events()))
}
