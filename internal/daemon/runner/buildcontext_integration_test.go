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
