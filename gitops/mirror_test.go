package gitops

import (
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/internal/testkit/testremote"
)

var filePolicy = RemotePolicy{Protocols: []string{remoteurl.File}}

func mustURL(t *testing.T, raw string) remoteurl.URL {
	t.Helper()
	u, err := remoteurl.Parse(raw)
	require.NoError(t, err)
	return u
}

// bareCopy makes a bare clone of repo named name under root.
func bareCopy(t *testing.T, repo, root, name string) string {
	t.Helper()
	dst := filepath.Join(root, name)
	gitT(t, "", "clone", "--quiet", "--bare", "--no-hardlinks", repo, dst)
	return dst
}

func TestFetchMirrorFromFileRemote(t *testing.T) {
	ctx := testCtx(t)
	state := t.TempDir()
	remote := newRepo(t)
	gitT(t, remote, "branch", "feature")
	gitT(t, remote, "branch", "forge/task-1") // a remote branch inside the managed namespace
	gitT(t, remote, "tag", "v1")
	u := mustURL(t, "file://"+remote+"/")

	mirror, err := FetchMirror(ctx, NewRunner(), state, u, filePolicy)
	require.NoError(t, err)
	assert.Equal(t, MirrorPath(state, mustURL(t, "FILE://"+remote)), mirror, "spellings of one remote share the mirror")
	assert.Equal(t, "true", gitT(t, mirror, "rev-parse", "--is-bare-repository"))
	main := gitT(t, remote, "rev-parse", "main")
	assert.Equal(t, main, refOf(t, mirror, "refs/heads/main"))
	assert.Equal(t, main, refOf(t, mirror, "refs/heads/feature"))
	assert.Empty(t, refOf(t, mirror, "refs/heads/forge/task-1"), "a remote branch in the managed namespace is never fetched")
	assert.Empty(t, refOf(t, mirror, "refs/tags/v1"), "no tags")
	keys, err := ListMirrors(state)
	require.NoError(t, err)
	assert.Equal(t, []string{u.Key()}, keys)

	// forged's result on the managed branch survives every later fetch,
	// while the remote's branches follow the remote (force-updated).
	work := cloneRepo(t, remote)
	result := commitFile(t, work, "r.txt", "result\n", "result")
	gitT(t, mirror, "fetch", "--quiet", work, "HEAD")
	gitT(t, mirror, "update-ref", "refs/heads/forge/task-1", result)
	gitT(t, remote, "commit", "--quiet", "--amend", "-m", "rewritten")
	gitT(t, remote, "branch", "-f", "forge/task-1", "main")
	_, err = FetchMirror(ctx, NewRunner(), state, u, filePolicy)
	require.NoError(t, err)
	assert.Equal(t, gitT(t, remote, "rev-parse", "main"), refOf(t, mirror, "refs/heads/main"))
	assert.Equal(t, result, refOf(t, mirror, "refs/heads/forge/task-1"))
}

func TestFetchMirrorOverHTTP(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	bare := bareCopy(t, newRepo(t), root, "repo.git")
	srv := testremote.NewFetchServer(t, root)
	u := mustURL(t, srv.URL("repo.git"))

	_, err := FetchMirror(ctx, NewRunner(), t.TempDir(), u, filePolicy)
	assert.Equal(t, failure.RemoteRefused, failure.CodeOf(err), "http is not allowed by a file-only policy")
	assert.Empty(t, srv.Paths(), "a refused remote is never contacted")

	state := t.TempDir()
	mirror, err := FetchMirror(ctx, NewRunner(), state, u, RemotePolicy{Protocols: []string{remoteurl.HTTP}})
	require.NoError(t, err)
	assert.Equal(t, refOf(t, bare, "refs/heads/main"), refOf(t, mirror, "refs/heads/main"))
}

// TestFetchMirrorRefusesHostileRemotes attacks the fetch as a hostile
// remote (or dispatch) would.
func TestFetchMirrorRefusesHostileRemotes(t *testing.T) {
	ctx := testCtx(t)
	marker := filepath.Join(t.TempDir(), "pwned")

	t.Run("fetching off", func(t *testing.T) {
		state := t.TempDir()
		_, err := FetchMirror(ctx, NewRunner(), state, mustURL(t, "file://"+newRepo(t)), RemotePolicy{})
		assert.Equal(t, failure.RemoteRefused, failure.CodeOf(err))
		_, statErr := os.Stat(filepath.Join(state, MirrorsDir))
		assert.True(t, os.IsNotExist(statErr), "nothing is made for a refused remote")
	})

	t.Run("redirect", func(t *testing.T) {
		root := t.TempDir()
		bareCopy(t, newRepo(t), root, "repo.git")
		srv := testremote.NewFetchServer(t, root)
		_, err := FetchMirror(ctx, NewRunner(), t.TempDir(), mustURL(t, srv.Server.URL+"/redirect/repo.git"), RemotePolicy{Protocols: []string{remoteurl.HTTP}})
		assert.Equal(t, failure.SandboxRemoteFetchFailed, failure.CodeOf(err), "a redirect is not followed")
	})

	t.Run("remote's upload-pack hook and mirror's own hooks and helpers", func(t *testing.T) {
		remote := newRepo(t)
		gitT(t, remote, "config", "uploadpack.packObjectsHook", "touch "+marker+" #")
		state := t.TempDir()
		u := mustURL(t, "file://"+remote)
		mirror, err := FetchMirror(ctx, NewRunner(), state, u, filePolicy)
		require.NoError(t, err)
		// Even a mirror whose configuration was tampered with runs no hook
		// and no credential helper.
		writeFile(t, filepath.Join(mirror, "hooks", "reference-transaction"), "#!/bin/sh\ntouch "+marker+"\n")
		require.NoError(t, os.Chmod(filepath.Join(mirror, "hooks", "reference-transaction"), 0o755))
		gitT(t, mirror, "config", "core.hooksPath", filepath.Join(mirror, "hooks"))
		gitT(t, mirror, "config", "credential.helper", "!touch "+marker+" #")
		commitFile(t, remote, "b.txt", "b\n", "b")
		_, err = FetchMirror(ctx, NewRunner(), state, u, filePolicy)
		require.NoError(t, err)
		assert.NoFileExists(t, marker)

		auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
		}))
		defer auth.Close()
		_, err = FetchMirror(ctx, NewRunner(), state, mustURL(t, auth.URL+"/r.git"), RemotePolicy{Protocols: []string{remoteurl.HTTP}})
		assert.Equal(t, failure.SandboxRemoteFetchFailed, failure.CodeOf(err))
		assert.NoFileExists(t, marker, "no credential helper, no prompt")
	})

	t.Run("transport syntax under the fetch's own configuration", func(t *testing.T) {
		// remoteurl never yields ext:: or fd::, and even if a URL got past
		// it, the fetch allows only its own protocol, whatever the
		// daemon's environment says.
		t.Setenv("GIT_ALLOW_PROTOCOL", "ext:fd:file:https")
		mirror, err := FetchMirror(ctx, NewRunner(), t.TempDir(), mustURL(t, "file://"+newRepo(t)), filePolicy)
		require.NoError(t, err)
		config := append([]string{"protocol.https.allow=always", "protocol.file.allow=always"}, mirrorConfig...)
		for _, url := range []string{"ext::sh -c touch% " + marker, "fd::0"} {
			_, err := NewRunner().Run(ctx, mirror, RunOpts{Config: config}, "fetch", "--end-of-options", url, "+refs/heads/*:refs/heads/*")
			assert.Error(t, err, url)
		}
		assert.NoFileExists(t, marker)
	})

	t.Run("stale temporaries of a crashed creation", func(t *testing.T) {
		state := t.TempDir()
		u := mustURL(t, "file://"+newRepo(t))
		stale := filepath.Join(state, MirrorsDir, ".new-"+u.Key()+"-123")
		other := filepath.Join(state, MirrorsDir, ".new-0123456789abcdef0123456789abcdef-9")
		require.NoError(t, os.MkdirAll(stale, 0o700))
		require.NoError(t, os.MkdirAll(other, 0o700))
		_, err := FetchMirror(ctx, NewRunner(), state, u, filePolicy)
		require.NoError(t, err)
		assert.NoDirExists(t, stale, "this key's leftover is removed under its lock")
		assert.DirExists(t, other, "another key's is not this lock's to touch")
	})

	t.Run("submodules", func(t *testing.T) {
		sub := newRepo(t)
		subHead := commitFile(t, sub, "only-in-sub.txt", "sub\n", "sub")
		remote := newRepo(t)
		gitT(t, remote, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", "file://"+sub, "vendored")
		gitT(t, remote, "commit", "--quiet", "-m", "submodule")
		mirror, err := FetchMirror(ctx, NewRunner(), t.TempDir(), mustURL(t, "file://"+remote), filePolicy)
		require.NoError(t, err)
		_, err = gitTry(t, mirror, "cat-file", "-e", subHead)
		assert.Error(t, err, "the submodule's commits are not fetched")
	})

	t.Run("pack over the size bound", func(t *testing.T) {
		remote := newRepo(t)
		noise := make([]byte, 1<<20)
		_, _ = rand.Read(noise)
		writeFile(t, filepath.Join(remote, "noise.bin"), string(noise))
		gitT(t, remote, "add", "noise.bin")
		gitT(t, remote, "commit", "--quiet", "-m", "noise")
		state := t.TempDir()
		u := mustURL(t, "file://"+remote)
		_, err := FetchMirror(ctx, NewRunner(), state, u, RemotePolicy{Protocols: []string{remoteurl.File}, MaxFetchBytes: 256 << 10})
		require.Error(t, err)
		assert.Equal(t, failure.SandboxRemoteFetchFailed, failure.CodeOf(err))
		mirror := MirrorPath(state, u)
		assert.Empty(t, refOf(t, mirror, "refs/heads/main"), "no ref moved")
		left, _ := filepath.Glob(filepath.Join(mirror, "objects", "pack", "*"))
		assert.Empty(t, left, "no partial pack is left")
		_, err = FetchMirror(ctx, NewRunner(), state, u, RemotePolicy{Protocols: []string{remoteurl.File}, MaxFetchBytes: 4 << 20})
		require.NoError(t, err, "within the bound it fetches")
	})

	t.Run("remote that never answers", func(t *testing.T) {
		release := make(chan struct{})
		hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer hang.Close()
		defer close(release)
		_, err := FetchMirror(ctx, NewRunner(), t.TempDir(), mustURL(t, hang.URL+"/r.git"), RemotePolicy{Protocols: []string{remoteurl.HTTP}, Timeout: 300e6})
		assert.Equal(t, failure.SandboxRemoteFetchFailed, failure.CodeOf(err))
		assert.Contains(t, err.Error(), "timed out")
	})
}

// TestFetchMirrorConcurrentAttempts fetches one remote from several
// goroutines, each under the mirror's repository lock, as attempts do.
func TestFetchMirrorConcurrentAttempts(t *testing.T) {
	ctx := testCtx(t)
	state := t.TempDir()
	remote := newRepo(t)
	u := mustURL(t, "file://"+remote)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := AcquireRepoLock(ctx, state, MirrorPath(state, u))
			if err != nil {
				errs <- err
				return
			}
			defer release() //nolint:errcheck
			_, err = FetchMirror(ctx, NewRunner(), state, u, filePolicy)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	mirror := MirrorPath(state, u)
	gitT(t, mirror, "fsck", "--strict", "--no-dangling")
	assert.Equal(t, gitT(t, remote, "rev-parse", "main"), refOf(t, mirror, "refs/heads/main"))
	entries, err := os.ReadDir(filepath.Join(state, MirrorsDir))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "one mirror, no temporaries left")
}
