package fleet_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/messages"
)

// startDaemon starts `forged daemon` on stateRoot with its own lock root
// and the given extra flags; the process is killed when the test ends.
func startDaemon(t *testing.T, forged, stateRoot, lockRoot string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(forged, append([]string{"daemon", "--socket", filepath.Join(stateRoot, "forged.sock"), "--state-root", stateRoot,
		"--lock-root", lockRoot, "--allow-rootful", "--host-reserved-cores", "0", "--host-reserve-bytes", strconv.Itoa(512 << 20), "--slots", "1"}, extra...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd
}

// TestRealMemberKilledMidAttempt: a `forged daemon` member runs an attempt
// forwarded to it by another member; it is killed with SIGKILL mid-run.
// The submitter ends the attempt with sandbox_runner_lost within 10 s (the
// figure is logged), and once the killed member is started again its own
// reaper leaves nothing of the attempt.
func TestRealMemberKilledMidAttempt(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	name := fleetName()

	submitter := realRunner(t)
	a := join(t, ca.config(t, etcd.Endpoint(), name, "submitter"), submitter)

	stateRoot, lockRoot := t.TempDir(), t.TempDir()
	victimID, err := runner.LoadRunnerID(stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := ca.member(t, "victim")
	victim := startDaemon(t, forged, stateRoot, lockRoot, "--fleet-etcd", etcd.Endpoint(), "--fleet-name", name,
		"--fleet-advertise", freeAddr(t), "--fleet-ca", ca.file, "--fleet-cert", cert, "--fleet-key", key)
	waitDirectory(t, a, 2*time.Minute, submitter.RunnerID(), victimID)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := example.BuildBaseImage(ctx, submitter.Docker(), "/bin/busybox"); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	if err := example.CreateRepo(ctx, repo, example.RepoOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: victimID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "sleep 120"}, Timeout: 300})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := fleet.Routed{Runner: submitter, Member: a}.Submit(d)
	if err != nil || !reply.Accepted {
		t.Fatalf("submit: %+v, %v", reply, err)
	}
	proxied, ok := submitter.Logs().Get(d.AttemptID())
	if !ok {
		t.Fatal("no proxied log")
	}
	for !slices.ContainsFunc(proxied.Events(), func(e messages.Event) bool { return e.EventType == "task_started" }) {
		if ctx.Err() != nil {
			t.Fatalf("the task never started; events %v", proxied.Events())
		}
		time.Sleep(200 * time.Millisecond)
	}

	killed := time.Now()
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	out, err := proxied.Wait(waitCtx)
	waitCancel()
	lost := time.Since(killed)
	if err != nil || out.Code != string(failure.SandboxRunnerLost) {
		t.Fatalf("after SIGKILL the attempt ended %+v, %v; want %s", out, err, failure.SandboxRunnerLost)
	}
	t.Logf("SIGKILL of the running member to %s for its submitter: %s", out.Code, lost)
	if lost > 10*time.Second {
		t.Fatalf("%s took %s, over the 10 s bound", out.Code, lost)
	}
	if left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+d.AttemptID()); len(left) == 0 {
		t.Fatal("the killed member's worker is already gone: the survivors must never touch it")
	}

	// The member returns (alone) and its start's reaper cleans up.
	restarted := startDaemon(t, forged, stateRoot, lockRoot)
	for {
		left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+d.AttemptID())
		if len(left) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the restart these remain: %v", left)
		}
		time.Sleep(time.Second)
	}
	_ = restarted.Process.Signal(syscall.SIGTERM)
	_ = restarted.Wait()
}
