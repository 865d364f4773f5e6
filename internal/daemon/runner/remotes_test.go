package runner

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/kit/remoteurl"
)

// A repo.remote dispatch is admitted only when the operator fetches over
// its protocol, and a file:// remote only under the repository roots, as
// a repo.localPath; every refusal comes before anything is admitted.
func TestAdmitRepoRemote(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "repos")
	inside := filepath.Join(root, "app")
	outside := filepath.Join(base, "secret")
	for _, dir := range []string{inside, outside} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	roots, err := resolveRepoRoots([]string{root})
	require.NoError(t, err)
	httpsOnly := gitops.RemotePolicy{Protocols: []string{remoteurl.HTTPS}}
	withFile := gitops.RemotePolicy{Protocols: []string{remoteurl.HTTPS, remoteurl.File}}

	for _, c := range []struct {
		remote string
		policy gitops.RemotePolicy
		code   failure.Code // "" admitted
	}{
		{"https://github.com/acme/app.git", gitops.RemotePolicy{}, failure.RemoteRefused},
		{"https://github.com/acme/app.git", httpsOnly, ""},
		{"http://github.com/acme/app.git", httpsOnly, failure.RemoteRefused},
		{"file://" + inside, httpsOnly, failure.RemoteRefused},
		{"file://" + inside, withFile, ""},
		{"file://" + outside, withFile, failure.RepoOutsideRoots},
		{"file://" + filepath.Join(root, "link"), withFile, failure.RepoOutsideRoots},
		{"file:///etc", withFile, failure.RepoOutsideRoots},
		{"ext::sh -c id", withFile, failure.DispatchInvalid},
	} {
		d := actortest.NewDispatch(time.Now().Add(time.Hour))
		d.Repo.LocalPath, d.Repo.Remote = "", c.remote
		refusal, ok := admitRepo(d, roots, c.policy)
		assert.Equal(t, c.code == "", ok, c.remote)
		if c.code == "" {
			continue
		}
		assert.Equal(t, string(c.code), refusal.Code, c.remote)
		assert.NotContains(t, refusal.Message, base, "the refusal names no host path")
		r := &Runner{repoRoots: roots, remotes: c.policy, metrics: metrics.New(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		reply, err := r.Submit(d) // refused before the runner's actors are asked
		require.NoError(t, err)
		assert.False(t, reply.Accepted)
		assert.Equal(t, string(c.code), reply.Code, c.remote)
	}
}

// The snapshot tells what the runner serves: roots, protocols, mirrors.
func TestRepositoriesListsMirrors(t *testing.T) {
	state := t.TempDir()
	u, err := remoteurl.Parse("https://github.com/acme/app.git")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(gitops.MirrorPath(state, u), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(state, gitops.MirrorsDir, ".new-123"), 0o700))
	r := &Runner{repoRoots: repoRoots{"/srv/repos"}, remotes: gitops.RemotePolicy{Protocols: []string{"https"}}, stateRoot: state,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	got := r.repositories()
	assert.Equal(t, []string{"/srv/repos"}, got.Roots)
	assert.Equal(t, []string{"https"}, got.RemoteProtocols)
	assert.Equal(t, []string{u.Key()}, got.Mirrors, "only finished mirrors are listed")
}
