package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func TestParseRepoSizes(t *testing.T) {
	sizes, err := ParseRepoSizes("1kx1k, 30kx10k,250x7")
	require.NoError(t, err)
	assert.Equal(t, []RepoSize{{1000, 1000}, {30000, 10000}, {250, 7}}, sizes)
	none, err := ParseRepoSizes("")
	require.NoError(t, err)
	assert.Empty(t, none)
	for _, bad := range []string{"1k", "x1k", "0x5", "ax1", "5x0"} {
		_, err := ParseRepoSizes(bad)
		assert.Error(t, err, bad)
	}
}

// The workspace volume has an inode for every file, directory and object
// of the checkout (twice over), never less than the default, never more
// than the maximum.
func TestWorkspaceSizedForTheRepository(t *testing.T) {
	assert.Equal(t, int64(messages.DefaultWorkspaceBytes), workspaceBytesFor(RepoSize{Files: 1000, Commits: 1000}, 1<<20))
	for _, files := range []int{100_000, 300_000} {
		got := workspaceBytesFor(RepoSize{Files: files, Commits: 1000}, 20<<20)
		assert.GreaterOrEqual(t, got/bytesPerInode, int64(files)*13/10*2, "%d files", files)
		assert.Zero(t, got%(1<<30), "whole GiB")
	}
	assert.Equal(t, int64(messages.MaxWorkspaceBytes), workspaceBytesFor(RepoSize{Files: 10_000_000, Commits: 1}, 0))
}

// The generator makes the tree and history asked for on top of the
// example's repository, and a second call reuses the cached repository.
func TestSyntheticRepoIsGeneratedOnceWithItsShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cache := t.TempDir()
	size := RepoSize{Files: 250, Commits: 12}
	dir, err := syntheticRepo(ctx, cache, size)
	require.NoError(t, err)
	tree, err := gitHost(ctx, cache, dir, "ls-tree", "-r", "--name-only", "main")
	require.NoError(t, err)
	names := strings.Fields(tree)
	assert.Len(t, names, 250+3, "the files, the README and the two .forge files")
	assert.Contains(t, names, ".forge/Dockerfile")
	assert.Contains(t, names, syntheticPath(249))
	count, err := gitHost(ctx, cache, dir, "rev-list", "--count", "main")
	require.NoError(t, err)
	assert.Equal(t, "13", strings.TrimSpace(count), "the example's commit and the 12 generated")

	marker := filepath.Join(dir, ".git", completeMarker)
	before, err := os.Stat(marker)
	require.NoError(t, err)
	again, err := syntheticRepo(ctx, cache, size)
	require.NoError(t, err)
	assert.Equal(t, dir, again)
	after, err := os.Stat(marker)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "the cached repository is reused, not regenerated")
}
