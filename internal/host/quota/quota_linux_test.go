package quota

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/messages"
)

// newImageStore returns a store in a temporary state root, skipping when
// this host cannot make images (not root, no loop devices, no mkfs.ext4).
func newImageStore(t *testing.T) *Store {
	t.Helper()
	facts := Detect(false)
	if !facts.Bounded() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs filesystem images: %s", facts.Reason)
		}
		t.Skipf("no filesystem images here: %s", facts.Reason)
	}
	return NewStore(t.TempDir(), facts, workerUID, workerGID)
}

const workerUID, workerGID = 10001, 10001

const testVolume = "forge-0123456789abcdef0123456789abcdef-workspace"

func loopsOf(t *testing.T, s *Store) []string {
	t.Helper()
	devs, err := loopsBackedBy(func(b string) bool { return strings.HasPrefix(b, s.Dir()+"/") })
	require.NoError(t, err)
	return devs
}

// TestImageFillsUpAndIsReleased makes a 64 MiB image, mounts it as the
// engine would, writes as the worker until the kernel says ENOSPC, and
// checks that the host sees the filesystem full both while mounted
// (statfs) and after unmount (superblock), that the image never took more
// of the host than its size, and that release leaves nothing, twice.
func TestImageFillsUpAndIsReleased(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	const size = 64 << 20
	opts, err := s.Provision(ctx, testVolume, size, "input", "output")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Release(context.Background(), testVolume) })
	assert.Equal(t, "ext4", opts["type"])
	assert.Equal(t, "nodev,nosuid", opts["o"])
	require.Equal(t, []string{opts["device"]}, loopsOf(t, s))

	usage, err := s.Usage(ctx, testVolume)
	require.NoError(t, err)
	assert.Equal(t, "superblock", usage.Source)
	assert.False(t, usage.Full())
	assert.InDelta(t, size, usage.TotalBytes, size/10)

	mnt := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(mnt), 0o755)) // the worker's uid walks to it
	require.NoError(t, unix.Mount(opts["device"], mnt, "ext4", unix.MS_NODEV|unix.MS_NOSUID, ""))
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(mnt, 0)
		}
	})
	for _, d := range []string{".", "input", "output"} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(mnt, d), &st))
		assert.Equal(t, uint32(workerUID), st.Uid, d)
		assert.Equal(t, uint32(workerGID), st.Gid, d)
	}
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"input", "output"}, names, "no lost+found: the task's tools walk the volume")

	// Fill it as the worker user would (a child process with uid 10001).
	img := filepath.Join(s.Dir(), testVolume+".img")
	before := allocated(t, img)
	fillAs(t, filepath.Join(mnt, "fill"))
	usage, err = s.Usage(ctx, testVolume)
	require.NoError(t, err)
	assert.Equal(t, "statfs", usage.Source)
	assert.True(t, usage.Full(), "%+v", usage)

	require.NoError(t, unix.Unmount(mnt, 0))
	mounted = false
	usage, err = s.Usage(ctx, testVolume)
	require.NoError(t, err)
	assert.Equal(t, "superblock", usage.Source)
	assert.False(t, usage.Stale, "Usage waits for the last copy of the mount to go: %+v", usage)
	assert.True(t, usage.Full(), "the superblock written at unmount says full: %+v", usage)
	after := allocated(t, img)
	assert.Greater(t, after, before)
	assert.LessOrEqual(t, after, int64(size), "the host gave the image at most its size")

	released, err := s.ReleaseAttempt(ctx, "0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	assert.Equal(t, []string{img}, released)
	assert.Empty(t, loopsOf(t, s))
	_, err = os.Stat(img)
	assert.True(t, errors.Is(err, os.ErrNotExist))
	require.NoError(t, s.Release(ctx, testVolume), "release is idempotent")
	released, err = s.Sweep(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, released)
}

// TestReleaseOfAMountedImageDetachesAtUnmount releases while the image is
// still mounted (a teardown that could not remove the volume): the image
// is unlinked at once and the loop device goes when it is unmounted.
func TestReleaseOfAMountedImageDetachesAtUnmount(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	opts, err := s.Provision(ctx, testVolume, 32<<20)
	require.NoError(t, err)
	mnt := t.TempDir()
	require.NoError(t, unix.Mount(opts["device"], mnt, "ext4", 0, ""))
	require.NoError(t, s.Release(ctx, testVolume))
	require.NoError(t, unix.Unmount(mnt, 0))
	// The kernel detaches at the last close, which a container being
	// created elsewhere on the host can delay by holding a copy of the
	// mount for a moment: wait for that event, with a deadline.
	assert.Eventually(t, func() bool { return len(loopsOf(t, s)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"autoclear detached the device at unmount")
}

func TestSweepReleasesLeftoversExceptLiveAttempts(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	live := "forge-11111111111111111111111111111111-workspace"
	_, err := s.Provision(ctx, testVolume, 16<<20)
	require.NoError(t, err)
	_, err = s.Provision(ctx, live, 16<<20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Release(context.Background(), live) })
	// The image of a leftover loop device may already be gone.
	require.NoError(t, os.Remove(filepath.Join(s.Dir(), testVolume+".img")))
	released, err := s.Sweep(ctx, func(hex string) bool { return hex == "11111111111111111111111111111111" })
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(s.Dir(), testVolume+".img")}, released)
	assert.Len(t, loopsOf(t, s), 1, "the live attempt's image stays attached")
}

func TestProvisionRefusesForeignNames(t *testing.T) {
	s := NewStore(t.TempDir(), Facts{Mechanism: MechanismImage}, workerUID, workerGID)
	for _, name := range []string{"../x", "forge-../../etc", "other", "forge-A"} {
		_, err := s.Provision(context.Background(), name, 16<<20)
		assert.Error(t, err, name)
	}
}

// allocated is the host disk the file takes (st_blocks).
func allocated(t *testing.T, path string) int64 {
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	return st.Blocks * 512
}

// fillAs writes zeros into path as the worker's uid until the write fails,
// and requires that it failed with ENOSPC.
func fillAs(t *testing.T, path string) {
	t.Helper()
	cmd := osCommand("/bin/sh", "-c", "dd if=/dev/zero of="+path+" bs=1M count=1024 2>&1; true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: workerUID, Gid: workerGID}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err)
	assert.Contains(t, string(out), "No space left on device")
}

// TestDetectLeavesNoLoopDevice: Detect tries a loop device with a scratch
// image, and nothing of the try is left bound.
func TestDetectLeavesNoLoopDevice(t *testing.T) {
	facts := Detect(false)
	if !facts.Bounded() && os.Getenv("CI") != "true" {
		t.Skipf("no filesystem images here: %s", facts.Reason)
	}
	require.True(t, facts.Bounded(), facts.Reason)
	// The kernel clears an autoclear device at its last close, from a
	// work queue: wait for it, with a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		devs, err := loopsBackedBy(func(b string) bool { return strings.Contains(b, ".forged-loop-probe-") })
		require.NoError(t, err)
		if len(devs) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "probe images still bound: %v", devs)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestImageIsTheOwnersWithItsFiles makes a control image for a slot's
// sandbox user with a host file placed in input/: mounted, the root, its
// directories and the file are that user's, the file mode 0400 with the
// host file's bytes. A file that cannot be placed fails the provision and
// leaves nothing.
func TestImageIsTheOwnersWithItsFiles(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "repo.bundle")
	content := []byte(strings.Repeat("bundle bytes\n", 50000))
	require.NoError(t, os.WriteFile(src, content, 0o600))
	owner := messages.SandboxUser{UID: 20003, GID: 20003}
	opts, err := s.ProvisionSpec(ctx, testVolume, Spec{Bytes: 32 << 20, Owner: owner, Dirs: []string{"input", "output"},
		Files: []File{{Dir: "input", Name: "repo.bundle", Source: src}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Release(context.Background(), testVolume) })

	mnt := t.TempDir()
	require.NoError(t, unix.Mount(opts["device"], mnt, "ext4", unix.MS_NODEV|unix.MS_NOSUID|unix.MS_RDONLY, ""))
	t.Cleanup(func() { _ = unix.Unmount(mnt, 0) })
	for _, p := range []string{".", "input", "output", "input/repo.bundle"} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(mnt, p), &st))
		assert.Equal(t, uint32(owner.UID), st.Uid, p)
		assert.Equal(t, uint32(owner.GID), st.Gid, p)
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(mnt, "input/repo.bundle"), &st))
	assert.Equal(t, uint32(unix.S_IFREG|0o400), st.Mode)
	got, err := os.ReadFile(filepath.Join(mnt, "input/repo.bundle"))
	require.NoError(t, err)
	assert.Equal(t, content, got)
	require.NoError(t, unix.Unmount(mnt, 0))

	for _, bad := range []Spec{
		{Bytes: 16 << 20, Dirs: []string{"input"}, Files: []File{{Dir: "input", Name: "repo.bundle", Source: "relative/path"}}},
		{Bytes: 16 << 20, Dirs: []string{"input"}, Files: []File{{Dir: "input", Name: "repo.bundle", Source: src + " x"}}},
		{Bytes: 16 << 20, Dirs: []string{"input"}, Files: []File{{Dir: "elsewhere", Name: "repo.bundle", Source: src}}},
		{Bytes: 16 << 20, Dirs: []string{"input"}, Files: []File{{Dir: "input", Name: "../repo.bundle", Source: src}}},
		{Bytes: 16 << 20, Owner: messages.SandboxUser{UID: -1, GID: 5}},
	} {
		const other = "forge-0123456789abcdef0123456789abcdef-control"
		_, err := s.ProvisionSpec(ctx, other, bad)
		assert.Error(t, err, "%+v", bad)
		_, statErr := os.Stat(filepath.Join(s.Dir(), other+".img"))
		assert.True(t, errors.Is(statErr, os.ErrNotExist), "%+v left its image", bad)
	}
	assert.Len(t, loopsOf(t, s), 1)
}

// Discard of a mounted volume reads its usage, then shuts the filesystem
// down: nothing more is written to it, its unmount writes nothing back,
// and Usage answers the reading taken at the discard until the release;
// the store holds the filesystem until Drop.
// A volume that is not mounted is left as it is.
func TestDiscardDropsAMountedVolumesUnwrittenPages(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	const size = 64 << 20
	opts, err := s.Provision(ctx, testVolume, size)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Release(context.Background(), testVolume) })
	done, err := s.Discard(ctx, testVolume)
	require.NoError(t, err)
	assert.False(t, done, "not mounted: nothing to discard")

	mnt := t.TempDir()
	require.NoError(t, unix.Mount(opts["device"], mnt, "ext4", unix.MS_NODEV|unix.MS_NOSUID, ""))
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(mnt, 0)
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "big"), make([]byte, 8<<20), 0o644))
	done, err = s.Discard(ctx, testVolume)
	require.NoError(t, err)
	assert.True(t, done)
	at, err := s.Usage(ctx, testVolume)
	require.NoError(t, err)
	assert.Equal(t, "statfs", at.Source)
	assert.Less(t, at.FreeBytes, at.TotalBytes-(8<<20), "the reading counts the file written")

	err = os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o644)
	assert.ErrorIs(t, err, unix.EIO, "a shut-down filesystem takes no more writes")
	// The engine's local driver unmounts lazily; the store's hold keeps
	// the filesystem until Drop.
	require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
	mounted = false
	assert.Len(t, s.held, 1, "the store holds the filesystem")
	again, err := s.Usage(ctx, testVolume)
	require.NoError(t, err)
	assert.Equal(t, at, again, "the superblock is not written: the discard's reading stands")

	require.NoError(t, s.Drop(ctx, testVolume))
	require.NoError(t, s.Close(), "waits for the drop's close")
	assert.Empty(t, s.held)
	require.NoError(t, s.Drop(ctx, testVolume), "nothing held: success")
	require.NoError(t, s.Release(ctx, testVolume))
	assert.Empty(t, loopsOf(t, s))
	assert.Empty(t, s.discarded, "the release forgets the reading")
}

// CopyDirOut reads a directory of an unmounted image with debugfs, and
// declines (false, nothing left in the host directory) whenever the
// engine's copy must judge: the filesystem still mounted, the directory a
// link or missing, or anything in it but plain regular files within the
// bounds.
func TestCopyDirOutReadsAnUnmountedImageOnlyWhenPlain(t *testing.T) {
	s := newImageStore(t)
	ctx := context.Background()
	const volume = "forge-0123456789abcdef0123456789abcdef-control"
	opts, err := s.ProvisionSpec(ctx, volume, Spec{Bytes: 32 << 20, Dirs: []string{"input", "output"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Release(context.Background(), volume) })
	mnt := t.TempDir()
	mount := func() {
		t.Helper()
		require.NoError(t, unix.Mount(opts["device"], mnt, "ext4", unix.MS_NODEV|unix.MS_NOSUID, ""))
	}
	unmount := func() {
		t.Helper()
		require.NoError(t, unix.Unmount(mnt, 0))
	}
	copyOut := func(maxBytes int64, maxFiles int) (bool, string) {
		t.Helper()
		host := filepath.Join(t.TempDir(), "output")
		ok, err := s.CopyDirOut(ctx, volume, "output", host, maxBytes, maxFiles)
		require.NoError(t, err)
		if !ok {
			entries, _ := os.ReadDir(host)
			assert.Empty(t, entries, "a declined copy leaves nothing")
		}
		return ok, host
	}

	mount()
	bundle := []byte(strings.Repeat("bundle\n", 100000))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "result.bundle"), bundle, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "result.json"), []byte(`{"ok":true}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "empty"), nil, 0o644))
	ok, _ := copyOut(1<<30, 64)
	assert.False(t, ok, "a mounted filesystem is not read")
	unmount()

	ok, host := copyOut(1<<30, 64)
	require.True(t, ok)
	entries, err := os.ReadDir(host)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode(), e.Name())
	}
	assert.Equal(t, []string{"empty", "result.bundle", "result.json"}, names)
	got, err := os.ReadFile(filepath.Join(host, "result.bundle"))
	require.NoError(t, err)
	assert.Equal(t, bundle, got)
	info, err := os.Stat(host)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, info.Mode())

	total := int64(len(bundle) + len(`{"ok":true}`))
	ok, _ = copyOut(total-1, 64)
	assert.False(t, ok, "over the byte bound")
	ok, _ = copyOut(total, 2)
	assert.False(t, ok, "over the file bound")
	ok, _ = copyOut(total, 3)
	assert.True(t, ok, "at both bounds")

	for name, unusual := range map[string]func(){
		"nothing unusual": nil,
		"symbolic link":   func() { require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(mnt, "output", "link"))) },
		"hard link": func() {
			require.NoError(t, os.Link(filepath.Join(mnt, "output", "empty"), filepath.Join(mnt, "input", "again")))
		},
		"directory": func() { require.NoError(t, os.Mkdir(filepath.Join(mnt, "output", "sub"), 0o755)) },
		"fifo":      func() { require.NoError(t, unix.Mkfifo(filepath.Join(mnt, "output", "fifo"), 0o644)) },
		"name with a space": func() {
			require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "a b"), nil, 0o644))
		},
		"name with a newline": func() {
			require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "a\nb"), nil, 0o644))
		},
		"option-like name": func() { require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "-p"), nil, 0o644)) },
		"output is a link": func() {
			require.NoError(t, os.Rename(filepath.Join(mnt, "output"), filepath.Join(mnt, "real")))
			require.NoError(t, os.Symlink("real", filepath.Join(mnt, "output")))
		},
		"output is missing": func() { require.NoError(t, os.Rename(filepath.Join(mnt, "output"), filepath.Join(mnt, "real"))) },
	} {
		t.Run(name, func(t *testing.T) {
			mount()
			require.NoError(t, os.RemoveAll(filepath.Join(mnt, "real")))
			require.NoError(t, os.RemoveAll(filepath.Join(mnt, "output")))
			require.NoError(t, os.RemoveAll(filepath.Join(mnt, "input", "again")))
			require.NoError(t, os.Mkdir(filepath.Join(mnt, "output"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(mnt, "output", "empty"), nil, 0o644))
			if unusual != nil {
				unusual()
			}
			unmount()
			ok, _ := copyOut(1<<30, 64)
			assert.Equal(t, unusual == nil, ok)
		})
	}

	_, err = s.CopyDirOut(ctx, "not-forged", "output", t.TempDir(), 1, 1)
	assert.Error(t, err, "a foreign volume name")
}
