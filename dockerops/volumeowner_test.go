package dockerops

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// A worker with a sandbox user of its own runs as it, its tmpfs mounts are
// its, and its writable volumes take no copy-up (which would give them
// back to the image's user); the image user's worker keeps the copy-up.
func TestWorkerRunsAsItsSandboxUser(t *testing.T) {
	spec := testSpec()
	spec.User = messages.SandboxUser{UID: 100003, GID: 100003}
	spec.Caches = []CacheMount{{Volume: "forge-x-cache-npm", Target: "/home/forge/.npm"}, {Volume: "forge-p-cache-pip", Target: "/home/forge/.pip-cache", ReadOnly: true}}
	cfg, host, _ := WorkerContainerConfig(spec)
	assert.Equal(t, "100003:100003", cfg.User)
	for _, dir := range []string{"/tmp", "/home/forge", "/run/forge"} {
		assert.Contains(t, host.Tmpfs[dir], ",uid=100003,gid=100003", dir)
	}
	for _, m := range host.Mounts {
		if m.Target == SecretsDir {
			continue
		}
		require.NotNil(t, m.VolumeOptions, m.Target)
		assert.True(t, m.VolumeOptions.NoCopy, m.Target)
	}

	spec.User = messages.SandboxUser{}
	cfg, host, _ = WorkerContainerConfig(spec)
	assert.Equal(t, "10001:10001", cfg.User, "the zero user is the image's")
	assert.Nil(t, host.Mounts[0].VolumeOptions, "the image user's workspace takes the copy-up")
}

func TestOwnerArchiveOwnsEachRootAndItsDirs(t *testing.T) {
	user := messages.SandboxUser{UID: 100001, GID: 100002}
	raw, err := ownerArchive([]OwnedVolume{{Volume: "forge-x-workspace"}, {Volume: "forge-x-control", Dirs: []string{"input", "output"}}}, user)
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(raw))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, byte(tar.TypeDir), h.Typeflag)
		assert.Equal(t, 100001, h.Uid)
		assert.Equal(t, 100002, h.Gid)
		assert.Equal(t, int64(0o755), h.Mode)
	}
	assert.Equal(t, []string{"0/", "1/", "1/input/", "1/output/"}, names)

	for _, bad := range []string{"..", "a/b", ".hidden", ""} {
		_, err := ownerArchive([]OwnedVolume{{Volume: "v", Dirs: []string{bad}}}, user)
		assert.Error(t, err, bad)
	}
}
