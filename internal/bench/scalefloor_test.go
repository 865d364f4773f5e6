package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// As root, B7's native floor clones onto a fresh ext4 image of the
// workspace's size, mounted for the run, and leaves nothing behind: no
// mount, no loop device, no image, no directory, even when a step fails.
func TestNativeFloorRunsOnAFreshImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the floor's image needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	workDir := t.TempDir()
	vols, err := newFloorVolumes(workDir)
	require.NoError(t, err)
	if vols.store == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs filesystem images: %s", vols.reason)
		}
		t.Skipf("no filesystem images here: %s", vols.reason)
	}
	assert.Equal(t, floorOnImage, vols.Where())

	const size = 64 << 20
	dir, release, err := vols.Mount(ctx, workDir, size)
	require.NoError(t, err)
	var fs, parent unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &fs))
	require.NoError(t, unix.Statfs(workDir, &parent))
	assert.Equal(t, int64(unix.EXT4_SUPER_MAGIC), int64(fs.Type))
	assert.NotEqual(t, parent.Fsid, fs.Fsid, "a filesystem of its own")
	assert.InDelta(t, size, int64(fs.Blocks)*fs.Bsize, size/10, "the size asked for")
	assert.NotZero(t, fs.Flags&unix.ST_NODEV, "nodev, as the engine mounts the volume")
	assert.NotZero(t, fs.Flags&unix.ST_NOSUID, "nosuid")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a fresh, empty filesystem")
	require.NoError(t, release())
	assertNothingLeft(t, vols, workDir)

	repo, err := syntheticRepo(ctx, t.TempDir(), RepoSize{Files: 50, Commits: 3})
	require.NoError(t, err)
	took, err := nativeFloor(ctx, workDir, repo, vols, size)
	require.NoError(t, err)
	for i, d := range took {
		assert.Positive(t, d, "step %d", i)
	}
	assertNothingLeft(t, vols, workDir)

	// A failing step (no repository to bundle) releases the image too.
	_, err = nativeFloor(ctx, workDir, filepath.Join(t.TempDir(), "no-repo"), vols, size)
	require.Error(t, err)
	assertNothingLeft(t, vols, workDir)
	require.NoError(t, vols.Close())
	entries, err = os.ReadDir(workDir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func assertNothingLeft(t *testing.T, vols *floorVolumes, workDir string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), workDir, "unmounted")
	images, err := filepath.Glob(filepath.Join(vols.store.Dir(), "*"))
	require.NoError(t, err)
	assert.Empty(t, images, "the image is removed")
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	require.NoError(t, err)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			assert.NotContains(t, string(b), vols.store.Dir(), "the loop device is detached: %s", f)
		}
	}
	left, err := filepath.Glob(filepath.Join(workDir, "floor-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the mount point and the bundle's directory are removed")
}
