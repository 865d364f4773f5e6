package dockerops

import (
	"github.com/forgedev/forged/internal/kit/ids"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func TestIntegrationImages(t *testing.T) {
	c := requireEngine(t)
	ctx := testCtx(t)
	base := baseImage(t)
	agent := agentImage(t)

	id, found, err := c.ImageID(ctx, agent)
	require.NoError(t, err)
	assert.True(t, found)
	assert.NotEqual(t, base, id)

	info, err := c.raw.ImageInspect(ctx, base)
	require.NoError(t, err)
	assert.Equal(t, "true", info.Config.Labels["dev.forge.test"])

	missing := testImagePrefix + "missing:" + ids.NewUUID()[:8]
	_, found, err = c.ImageID(ctx, missing)
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, c.RemoveImage(ctx, missing), "removing a missing image succeeds")
}

func TestIntegrationBuildFailure(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	tag := testImagePrefix + "broken:" + runTag
	ctxTar := tarOf(t, map[string][]byte{
		"Dockerfile": []byte("FROM " + base + "\nRUN [\"/bin/sh\", \"-c\", \"echo building; echo details >&2; exit 7\"]\n"),
	}, nil)
	var logs []string
	_, err := c.BuildImage(testCtx(t), BuildRequest{ContextTar: ctxTar, Tags: []string{tag}, OnLog: func(l string) { logs = append(logs, l) }})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "returned a non-zero code: 7")
	assert.Contains(t, err.Error(), "building")
	assert.Contains(t, logs, "building")
	_, found, err := c.ImageID(testCtx(t), tag)
	require.NoError(t, err)
	assert.False(t, found)
}

func TestIntegrationSeccompProfile(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "seccomp.json")
	require.NoError(t, os.WriteFile(profile, []byte(`{ "defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [ { "names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO" } ] }`), 0o600))
	opts, err := ResolveSecurityOptions(messages.PolicyAdoption, profile, "", EngineSecurity{})
	require.NoError(t, err)
	s := provision(t, `mkdir /tmp/blocked 2>/dev/null && echo "mkdir allowed" || echo "mkdir denied"`, func(spec *WorkerSpec) {
		spec.SecurityOpts = opts
	})
	lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, []string{"mkdir denied"}, lines, strings.Join(lines, "\n"))
}

// The Engine API wants the profile's content: a path, as the docker CLI
// accepts it, makes the worker fail to start.
func TestIntegrationSeccompPathIsNotAProfile(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "seccomp.json")
	require.NoError(t, os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o600))
	s := provision(t, "echo never", func(spec *WorkerSpec) { spec.SecurityOpts = []string{"seccomp=" + profile} })
	_, _, err := s.run(t, testCtx(t), "", RunLimits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "container start")
	assert.Contains(t, strings.ToLower(err.Error()), "seccomp")
}
