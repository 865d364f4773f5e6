package runner_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/messages"
)

// Finding 2 of issue 28: a config commit whose .gitattributes asks for
// export-subst on .forge/Dockerfile, whose Dockerfile holds
// `RUN true $Format:%B$`, and whose message body carries an `ADD` of a URL
// on the host's loopback. The build policy checks the blob (no ADD there);
// `git archive` spliced the message in and the engine fetched the URL from
// the host. Now the context is the tree as committed: the listener sees
// nothing and the attempt builds and runs the checked Dockerfile.
func TestEndToEndBuildContextIsTheCheckedDockerfile(t *testing.T) {
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("payload\n"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	e := newE2E(t, runner.Config{})
	repo := filepath.Join(t.TempDir(), "repo-subst")
	require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nRUN true $Format:%B$\nLABEL subst=" + example.NewUUID() + "\n",
	}))
	e.repo = repo
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte(".forge/Dockerfile export-subst\n"), 0o644))
	e.git("add", ".gitattributes")
	e.git("commit", "--quiet", "-m", "config\n\nADD http://"+ln.Addr().String()+"/x /x\n")

	log := e.submit(e.dispatch([]string{"/bin/sh", "-c", "test ! -e /x"}, 0))
	out := e.wait(log)
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(log))
	assert.Zero(t, hits.Load(), "the build fetched from the host's loopback")
}

// Finding 9 of issue 28: adoption builds pulled a missing FROM image
// (PullParent false only prefers local images). A registry on the host's
// loopback stands for the internet: without --allow-build-pulls the build
// is refused before the engine contacts it; with it, the engine tries.
func TestEndToEndBuildsDoNotPullUnlessAllowed(t *testing.T) {
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "no such image", http.StatusNotFound)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dockerfile := "FROM " + ln.Addr().String() + "/forged-test/absent:latest\nLABEL pull=" + example.NewUUID() + "\n"

	for _, allow := range []bool{false, true} {
		e := newE2E(t, runner.Config{AllowBuildPulls: allow})
		repo := filepath.Join(t.TempDir(), "repo-pull")
		require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{Dockerfile: dockerfile}))
		e.repo = repo
		before := hits.Load()
		log := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
		out := e.wait(log)
		assert.Equal(t, messages.StatusFailed, out.Status, "allow=%v %+v", allow, out)
		if allow {
			assert.Equal(t, failure.SandboxBuildFailed, failure.Code(out.Code), "%+v", out)
			assert.Positive(t, hits.Load()-before, "with pulls allowed, the engine asks the registry")
			continue
		}
		assert.Equal(t, failure.SandboxBuildPolicy, failure.Code(out.Code), "%+v", out)
		assert.Contains(t, out.Message, "--allow-build-pulls")
		assert.Zero(t, hits.Load()-before, "the engine contacted the registry")
	}
}
