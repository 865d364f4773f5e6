package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/docker/docker/api/types/mount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestWorkerContainerConfigMountsTheCredentials(t *testing.T) {
	for _, writable := range []bool{false, true} {
		spec := testSpec()
		spec.Credentials = &CredentialsMount{Volume: "forge-x-credentials", Target: "/home/forge/.codex", Writable: writable}
		_, host, _ := WorkerContainerConfig(spec)
		assert.Contains(t, host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: "forge-x-credentials", Target: "/home/forge/.codex",
			ReadOnly: !writable, VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
		assert.Contains(t, host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: "forge-x-secrets", Target: SecretsDir, ReadOnly: true},
			"the secrets volume stays read-only at its place")
		_, err := newClient(fastOptions(), &fakeCreator{}).CreateWorker(context.Background(), spec)
		assert.NoError(t, err)
	}
	_, host, _ := WorkerContainerConfig(testSpec())
	for _, m := range host.Mounts {
		assert.NotEqual(t, "forge-x-credentials", m.Source, "no credentials mount without one")
	}
}

func TestCreateWorkerRefusesACredentialsMountOutsideItsRoots(t *testing.T) {
	c := newClient(fastOptions(), &fakeCreator{})
	for _, m := range []CredentialsMount{
		{Volume: "v", Target: "/workspace/.codex", Writable: true},
		{Volume: "v", Target: "/control"},
		{Volume: "v", Target: "/etc"},
		{Volume: "v", Target: "/home/forge"},
		{Volume: "v", Target: "/home/forge/../../etc"},
		{Volume: "", Target: "/home/forge/.codex"},
		{Volume: "v", Target: "/home/forge/.npm"},
		{Volume: "v", Target: "/home/forge/.npm/creds"},
		{Volume: "v", Target: "/home/forge/.cache"},
	} {
		spec := testSpec()
		spec.Caches = []CacheMount{{Volume: "forge-x-cache-npm", Target: "/home/forge/.npm"}, {Volume: "forge-x-cache-yarn", Target: "/home/forge/.cache/yarn"}}
		spec.Credentials = &m
		_, err := c.CreateWorker(context.Background(), spec)
		assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err), "%+v", m)
	}
}

func TestVolumeArchiveModes(t *testing.T) {
	archive, err := volumeArchive([]VolumeFile{{Name: "ro", Content: []byte("a")}, {Name: "rw", Content: []byte("b"), Writable: true}}, 1234, 1234)
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(archive))
	modes := map[string]int64{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		modes[hdr.Name] = hdr.Mode
		assert.Equal(t, 1234, hdr.Uid)
	}
	assert.Equal(t, map[string]int64{"ro": 0o400, "rw": 0o600}, modes)
}
