package fleet_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// addMember starts one more member of f (without fleet placement) with
// slots and extra daemon flags.
func (f *testFleet) addMember(t *testing.T, slots int, extra ...string) *member {
	t.Helper()
	m := &member{t: t, forged: f.forged, stateRoot: t.TempDir(), lockRoot: t.TempDir(), advertise: freeAddr(t)}
	id, err := runner.LoadRunnerID(m.stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	m.runnerID = id
	m.cert, m.key = f.ca.member(t, "m"+strconv.Itoa(len(f.members)))
	m.args = append([]string{"--slots", strconv.Itoa(slots), "--fleet-etcd", f.etcd.Endpoint(), "--fleet-name", f.name,
		"--fleet-advertise", m.advertise, "--fleet-ca", f.ca.file, "--fleet-cert", m.cert, "--fleet-key", m.key}, extra...)
	m.start(t, m.args...)
	f.members = append(f.members, m)
	return m
}

// TestFleetPlacesRemoteDispatchesOnMembersThatFetch: two `forged daemon`
// members on a real etcd and the real engine; m0 places and has free
// slots but fetches no remote, m1 fetches file:// remotes under its
// repository root. A repo.remote dispatch left to the fleet and submitted
// to m0 runs on m1, from m1's mirror (m0 makes none), and the directory
// then lists the mirror; a remote no member fetches is capacity_exhausted,
// and one sent to m0 by its runner id is dispatch_remote_refused.
func TestFleetPlacesRemoteDispatchesOnMembersThatFetch(t *testing.T) {
	engine := enginetest.Client(t)
	served := t.TempDir()
	f := newTestFleet(t, 2)
	m0 := f.members[0]
	m1 := f.addMember(t, 1, "--remote-protocols", "file", "--repo-root", served)
	f.waitDirectory(2*time.Minute, m0, m1)
	dir := f.directory()
	if got := dir[m1.runnerID].GetRemoteProtocols(); !slices.Equal(got, []string{"file"}) || !slices.Equal(dir[m1.runnerID].GetRepoRoots(), []string{served}) {
		t.Fatalf("m1 is listed with remote protocols %v, roots %v; want [file], [%s]", got, dir[m1.runnerID].GetRepoRoots(), served)
	}
	if got := dir[m0.runnerID].GetRemoteProtocols(); len(got) != 0 {
		t.Fatalf("m0 is listed with remote protocols %v; want none", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo := exampleRepo(ctx, t)
	bare := filepath.Join(served, "app.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", repo, bare).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	dispatch := func(runnerID, remote string) *messages.Dispatch {
		d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
			Argv: []string{"/bin/sh", "-c", "echo fetched > fetched.txt"}, Timeout: 300, MemoryBytes: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		d.Repo.LocalPath, d.Repo.Remote = "", remote
		t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
		return d
	}

	d := dispatch(fleet.AnyMember, "file://"+bare)
	if _, err := m0.api.Submit(ctx, d); err != nil {
		t.Fatalf("submit the remote dispatch to m0: %v", err)
	}
	out, types, err := m0.outcome(ctx, d.AttemptID())
	if err != nil || out.Status != messages.StatusSucceeded {
		t.Fatalf("the remote dispatch ended %+v, %v; events %v", out, err, types)
	}
	u, err := remoteurl.Parse(d.Repo.Remote)
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", gitops.MirrorPath(m1.stateRoot, u), "rev-parse", "refs/heads/"+d.Lease.WorktreeKey).Output()
	if err != nil || strings.TrimSpace(string(head)) != out.ResultCommitSHA {
		t.Fatalf("m1's mirror holds %q (%v) on the managed branch; want the result %s", head, err, out.ResultCommitSHA)
	}
	if _, err := os.Stat(filepath.Join(m0.stateRoot, gitops.MirrorsDir)); !os.IsNotExist(err) {
		t.Errorf("m0, which fetches nothing, has a mirrors directory (%v)", err)
	}
	if got := f.directory()[m1.runnerID].GetMirrors(); !slices.Equal(got, []string{u.Key()}) {
		t.Errorf("m1 is listed with mirrors %v; want [%s]", got, u.Key())
	}

	if _, err := m0.api.Submit(ctx, dispatch(fleet.AnyMember, "https://github.com/acme/app.git")); failure.CodeOf(err) != failure.CapacityExhausted {
		t.Errorf("a remote no member fetches = %v; want %s", err, failure.CapacityExhausted)
	}
	if _, err := m0.api.Submit(ctx, dispatch(m0.runnerID, "file://"+bare)); failure.CodeOf(err) != failure.RemoteRefused {
		t.Errorf("a remote sent to m0 by its runner id = %v; want %s", err, failure.RemoteRefused)
	}
}
