package dockerops

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/mount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// volumeImage builds, on the agent image, one that declares VOLUME paths:
// one the worker mounts anyway (/workspace) and two it does not.
func volumeImage(t *testing.T) string {
	t.Helper()
	c := requireEngine(t)
	agent := agentImage(t)
	tag := testImagePrefix + "volumes:" + runTag
	imagesMu.Lock()
	testImages = append(testImages, tag)
	imagesMu.Unlock()
	ctxTar := tarOf(t, map[string][]byte{"Dockerfile": []byte("FROM " + agent + "\nVOLUME /data /var/lib/db/ /workspace\n")}, nil)
	_, err := c.BuildImage(testCtx(t), BuildRequest{ContextTar: ctxTar, Tags: []string{tag}})
	require.NoError(t, err)
	return tag
}

// Every container forged creates from an image with VOLUMEs (the worker,
// the credential loader, the secrets writer) gets no anonymous volume: a
// bounded tmpfs covers each declared path, and nothing is left after.
func TestIntegrationImageVolumesAreCoveredAndNothingLeaks(t *testing.T) {
	image := volumeImage(t)
	s := provision(t, "grep -E ' /(data|var/lib/db) ' /proc/mounts", func(spec *WorkerSpec) { spec.Image = image })
	worker := s.container
	ctx := testCtx(t)
	t.Cleanup(func() { enginetest.AssertNoAnonymousVolumes(t, s.c.raw) })

	info, err := s.c.raw.ContainerInspect(ctx, worker)
	require.NoError(t, err)
	for _, m := range info.Mounts {
		if m.Type == mount.TypeVolume {
			assert.True(t, strings.HasPrefix(m.Name, "forge-"), "anonymous volume %+v", m)
		}
		assert.NotContains(t, []string{"/data", "/var/lib/db"}, m.Destination, "%+v", m)
	}
	assert.Contains(t, info.HostConfig.Tmpfs, "/data")
	assert.Contains(t, info.HostConfig.Tmpfs, "/var/lib/db")
	assert.NotContains(t, info.HostConfig.Tmpfs, "/workspace", "the workspace volume covers it")
	lines, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode, "%v", lines)
	assert.Len(t, lines, 2, "both paths are tmpfs mounts: %v", lines)
	for _, l := range lines {
		assert.Contains(t, l, "tmpfs", l)
	}

	// The helpers: created, filled and removed, never started.
	require.NoError(t, s.c.LoadVolume(ctx, image, s.names.Prefix+"-loader", s.names.SecretsVolume, s.labels,
		[]VolumeFile{{Name: "token", Content: []byte("x")}}, messages.WorkerUID, messages.WorkerGID))
	require.NoError(t, s.c.WriteSecrets(ctx, s.names.Prefix+"-secrets", image, s.names.SecretsVolume, s.labels,
		map[string][]byte{"db": []byte("y")}))
	assert.Empty(t, enginetest.AnonymousVolumes(t, s.c.raw))
}
