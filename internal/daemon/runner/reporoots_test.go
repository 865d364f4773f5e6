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
	"github.com/forgedev/forged/internal/daemon/metrics"
)

// A dispatch may name only a repository under the operator's roots, its
// symlinks resolved: a link inside a root to a repository outside, a
// sibling sharing the root's prefix, a missing path and a relative escape
// are refused alike, before anything is admitted.
func TestRepoRootsRefuseRepositoriesOutside(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "repos")
	inside := filepath.Join(root, "team", "app")
	outside := filepath.Join(base, "secret-repo")
	sibling := filepath.Join(base, "repos-evil", "app")
	for _, dir := range []string{inside, outside, sibling} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	require.NoError(t, os.Symlink(root, filepath.Join(base, "root-link")))

	// The root itself may be named through a symlink.
	roots, err := resolveRepoRoots([]string{filepath.Join(base, "root-link")})
	require.NoError(t, err)
	r := &Runner{repoRoots: roots, metrics: metrics.New(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	for path, want := range map[string]bool{
		inside: true, root: true, filepath.Join(base, "root-link", "team", "app"): true,
		outside: false, filepath.Join(root, "link"): false, sibling: false,
		filepath.Join(root, "missing"): false, "/": false, "/etc": false,
	} {
		d := actortest.NewDispatch(time.Now().Add(time.Hour))
		d.Repo.LocalPath = path
		refusal, ok := roots.admit(d)
		assert.Equal(t, want, ok, path)
		if want {
			continue
		}
		assert.Equal(t, string(failure.RepoOutsideRoots), refusal.Code, path)
		assert.NotContains(t, refusal.Message, path, "the refusal names no host path")
		reply, err := r.Submit(d) // refused before the runner's actors are asked
		require.NoError(t, err)
		assert.False(t, reply.Accepted, path)
		assert.Equal(t, string(failure.RepoOutsideRoots), reply.Code, path)
	}

	// No roots: any path (the default, warned about at start).
	d := actortest.NewDispatch(time.Now().Add(time.Hour))
	d.Repo.LocalPath = outside
	_, ok := repoRoots(nil).admit(d)
	assert.True(t, ok)

	// The operator's roots are checked at start.
	for _, bad := range []string{"relative/dir", filepath.Join(base, "missing"), filepath.Join(inside, "..", "..", "..", "nofile")} {
		_, err := resolveRepoRoots([]string{bad})
		assert.Error(t, err, bad)
	}
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = resolveRepoRoots([]string{file})
	assert.ErrorContains(t, err, "not a directory")
}
