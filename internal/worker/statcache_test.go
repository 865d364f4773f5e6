package worker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statCacheFixture materialises a repository of a few same-sized files
// and returns the workspace.
func statCacheFixture(t *testing.T) (*fixture, *workspace) {
	t.Helper()
	h := newHostRepo(t)
	for _, name := range []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt"} {
		h.write(name, "content of "+strings.Repeat("x", 20)+"\n")
	}
	h.git("add", "-A")
	h.git("commit", "-q", "-m", "same-sized files")
	f := newFixtureFrom(t, h)
	ws, err := materialize(f.cfg, f.pkt.Identity)
	require.NoError(t, err)
	return f, ws
}

// trustCheckout waits (by making stamp files, not by sleeping) until the
// filesystem's clock has moved past every file the checkout wrote, and
// takes a new stamp: every record is then trusted, so only the stat data
// comparison stands between a changed file and a stale blob.
func trustCheckout(t *testing.T, ws *workspace) {
	t.Helper()
	var newest int64
	for _, rec := range ws.stats.files {
		newest = max(newest, rec.stat.Ctime)
	}
	for range 10_000_000 {
		if stamp := checkoutStamp(filepath.Join(ws.dir, gitDirName)); stamp > newest {
			ws.stats.stamp = stamp
			return
		}
	}
	t.Fatal("the filesystem's clock did not move")
}

// rewriteKeepingStat replaces a file's content by other bytes of the same
// size and puts its mtime back, as a task hiding a change would.
func rewriteKeepingStat(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := bytes.ToUpper(old)
	require.NotEqual(t, old, changed)
	require.NoError(t, os.WriteFile(path, changed, fi.Mode().Perm()))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fi.Size(), after.Size())
	require.Equal(t, fi.ModTime(), after.ModTime(), "the task restored the mtime")
	return string(changed)
}

// A task that rewrites files right after the checkout (in the same clock
// tick: the racy case) with the same sizes and restores their mtimes still
// has its content committed: records not older than the stamp are not
// trusted.
func TestStatCacheRacyRewriteIsCommitted(t *testing.T) {
	f, ws := statCacheFixture(t)
	want := map[string]string{}
	for _, name := range []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt"} {
		want[name] = rewriteKeepingStat(t, filepath.Join(ws.dir, filepath.FromSlash(name)))
	}
	res, err := ws.commitResult(testAttemptID, f.pkt.Task, func(string, ...any) {})
	require.NoError(t, err)
	require.False(t, res.commit.IsZero(), "the rewrite is a change")
	git := &hostRepo{t: t, dir: ws.dir, env: f.host.env}
	for name, content := range want {
		assert.Equal(t, strings.TrimSpace(content), git.git("show", res.commit.String()+":"+name))
	}
}

// Once the checkout is older than the stamp, unchanged files are not read
// again, and a rewrite hiding its size and mtime is caught by its ctime
// (which no unprivileged process sets); a file swapped with another of
// the same size and mtime by its inode; a chmod by its mode.
func TestStatCacheTrustsOnlyUnchangedFiles(t *testing.T) {
	f, ws := statCacheFixture(t)
	trustCheckout(t, ws)
	tree, _, err := ws.stageTree(ws.treeOf(ws.input))
	require.NoError(t, err)
	assert.Equal(t, ws.treeOf(ws.input).Hash, tree, "nothing changed")
	assert.Zero(t, ws.hashedFiles, "no file is read again")

	a := rewriteKeepingStat(t, filepath.Join(ws.dir, "a.txt"))
	c, d := filepath.Join(ws.dir, "dir", "c.txt"), filepath.Join(ws.dir, "dir", "d.txt")
	require.NoError(t, os.WriteFile(c, []byte("content of CCCCCCCCCCCCCCCCCCCC\n"), 0o644))
	fi, err := os.Stat(d)
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(c, fi.ModTime(), fi.ModTime()))
	tmp := filepath.Join(ws.dir, "dir", "swap")
	require.NoError(t, os.Rename(c, tmp))
	require.NoError(t, os.Rename(d, c))
	require.NoError(t, os.Rename(tmp, d))
	require.NoError(t, os.Chmod(filepath.Join(ws.dir, "b.txt"), 0o755))

	res, err := ws.commitResult(testAttemptID, f.pkt.Task, func(string, ...any) {})
	require.NoError(t, err)
	assert.Equal(t, 4, ws.hashedFiles, "the rewritten, swapped and chmodded files are read; nothing else")
	git := &hostRepo{t: t, dir: ws.dir, env: f.host.env}
	commit := res.commit.String()
	assert.Equal(t, strings.TrimSpace(a), git.git("show", commit+":a.txt"))
	assert.Equal(t, "content of CCCCCCCCCCCCCCCCCCCC", git.git("show", commit+":dir/d.txt"))
	assert.Equal(t, "content of xxxxxxxxxxxxxxxxxxxx", git.git("show", commit+":dir/c.txt"))
	assert.Contains(t, git.git("ls-tree", commit, "b.txt"), "100755 blob")
}
