package runner_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/internal/testkit/testremote"
	"github.com/forgedev/forged/messages"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// A dispatch naming repo.remote (a smart-HTTP remote on loopback) runs on
// the real engine from the runner's mirror of it: the input is the
// remote's main, the result lands on the managed branch in the mirror and
// is published as from a host repository; the remote itself is never
// written to, and the snapshot lists the mirror.
func TestEndToEndRemoteDispatchRunsFromTheMirror(t *testing.T) {
	published := filepath.Join(t.TempDir(), "published.git")
	require.NoError(t, exec.Command("git", "init", "-q", "--bare", published).Run())
	e := newE2E(t, runner.Config{
		Remotes:        gitops.RemotePolicy{Protocols: []string{remoteurl.HTTP}},
		Redeemer:       localRedeemer{remote: published},
		ValidateRemote: func(string) error { return nil }, // a local bare repository stands in for GitHub
	})
	served := t.TempDir()
	bare := filepath.Join(served, "app.git")
	gitIn(t, "", "clone", "-q", "--bare", e.repo, bare)
	srv := testremote.NewFetchServer(t, served)
	remoteRefs := gitIn(t, bare, "for-each-ref", "--format=%(refname) %(objectname)")

	d := e.dispatch(nil, 0)
	d.Repo.LocalPath, d.Repo.Remote = "", srv.URL("app.git")
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
	out := e.wait(e.submit(d))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)

	u, err := remoteurl.Parse(d.Repo.Remote)
	require.NoError(t, err)
	mirror := gitops.MirrorPath(e.stateRoot, u)
	assert.Equal(t, out.ResultCommitSHA, gitIn(t, mirror, "rev-parse", "refs/heads/"+example.Branch), "the managed branch lives in the mirror")
	assert.Equal(t, gitIn(t, bare, "rev-parse", "main"), gitIn(t, mirror, "rev-parse", example.Branch+"^"), "the input is the remote's main")
	assert.Equal(t, "hello from the sandbox", gitIn(t, mirror, "show", example.Branch+":hello.txt"))
	assert.Equal(t, out.ResultCommitSHA, out.PublishedCommitSHA)
	assert.Equal(t, out.ResultCommitSHA, gitIn(t, published, "rev-parse", "refs/heads/"+example.Branch))
	assert.Equal(t, remoteRefs, gitIn(t, bare, "for-each-ref", "--format=%(refname) %(objectname)"), "the fetched remote is never written to")
	assert.NotEmpty(t, srv.Paths())

	snap, err := e.runner.Snapshot()
	require.NoError(t, err)
	require.NotNil(t, snap.Repositories)
	assert.Equal(t, []string{u.Key()}, snap.Repositories.Mirrors)
	assert.Equal(t, []string{remoteurl.HTTP}, snap.Repositories.RemoteProtocols)
}

// A remote that cannot be fetched ends the attempt with
// sandbox_remote_fetch_failed before any container exists.
func TestEndToEndUnreachableRemoteFailsTheAttempt(t *testing.T) {
	e := newE2E(t, runner.Config{Remotes: gitops.RemotePolicy{Protocols: []string{remoteurl.File}}})
	d := e.dispatch(nil, 0)
	d.Repo.LocalPath, d.Repo.Remote = "", "file://"+filepath.Join(t.TempDir(), "no-such-repo.git")
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxRemoteFetchFailed), string(out.Code), out.Message)
}

// Two attempts on one file:// remote at once (different managed branches)
// share the mirror without corrupting it: each fetch and branch move
// holds the mirror's lock. A third attempt on the first branch starts from
// that branch's result in the mirror, not from the remote.
func TestEndToEndConcurrentAttemptsShareOneMirror(t *testing.T) {
	served := t.TempDir()
	e := newE2E(t, runner.Config{
		Remotes:   gitops.RemotePolicy{Protocols: []string{remoteurl.File}},
		RepoRoots: []string{served},
	})
	bare := filepath.Join(served, "app.git")
	gitIn(t, "", "clone", "-q", "--bare", e.repo, bare)
	remote := "file://" + bare

	first := e.dispatch([]string{"/bin/sh", "-c", "echo one > one.txt"}, 0)
	second := e.dispatch([]string{"/bin/sh", "-c", "echo two > two.txt"}, 0)
	second.Lease.WorktreeKey = "forge/second-task"
	for _, d := range []*messages.Dispatch{first, second} {
		d.Repo.LocalPath, d.Repo.Remote = "", remote
	}
	logs := []*runner.Log{e.submit(first), e.submit(second)}
	outs := []messages.AttemptOutcome{e.wait(logs[0]), e.wait(logs[1])}
	for _, out := range outs {
		require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	}
	u, err := remoteurl.Parse(remote)
	require.NoError(t, err)
	mirror := gitops.MirrorPath(e.stateRoot, u)
	gitIn(t, mirror, "fsck", "--strict", "--no-dangling")
	assert.Equal(t, outs[0].ResultCommitSHA, gitIn(t, mirror, "rev-parse", "refs/heads/"+first.Lease.WorktreeKey))
	assert.Equal(t, outs[1].ResultCommitSHA, gitIn(t, mirror, "rev-parse", "refs/heads/"+second.Lease.WorktreeKey))
	assert.Empty(t, gitIn(t, bare, "for-each-ref", "refs/heads/forge/"), "the remote has no managed branch")

	third := e.dispatch([]string{"/bin/sh", "-c", "echo three > three.txt"}, 0)
	third.Repo.LocalPath, third.Repo.Remote = "", remote
	out := e.wait(e.submit(third))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	assert.Equal(t, outs[0].ResultCommitSHA, gitIn(t, mirror, "rev-parse", first.Lease.WorktreeKey+"^"), "the next attempt continues from the branch's result")
	assert.Equal(t, "one", gitIn(t, mirror, "show", first.Lease.WorktreeKey+":one.txt"))
}
