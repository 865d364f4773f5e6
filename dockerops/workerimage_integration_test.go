package dockerops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worker inherits neither the image's HEALTHCHECK nor its STOPSIGNAL,
// nor the ENV that would steer forged (FORGE_*, Go runtime knobs, loader
// injection, proxies); the rest of the ENV (PATH, toolchain homes)
// survives, and forged's own variables win.
func TestIntegrationWorkerResetsImageHealthcheckStopSignalAndEnv(t *testing.T) {
	c := requireEngine(t)
	agent := agentImage(t)
	tag := testImagePrefix + "inherit:" + runTag
	imagesMu.Lock()
	testImages = append(testImages, tag)
	imagesMu.Unlock()
	dockerfile := "FROM " + agent + "\n" +
		"ENV FORGE_EVIL=1 FORGE_FENCING_TOKEN=forged-by-image GODEBUG=madvdontneed=0 GOMAXPROCS=64 LD_PRELOAD=/x.so HTTPS_PROXY=http://10.0.0.1:3128 http_proxy=http://10.0.0.1:3128 TOOL_HOME=/opt/tool\n" +
		"HEALTHCHECK --interval=1s CMD false\nSTOPSIGNAL SIGKILL\n"
	_, err := c.BuildImage(testCtx(t), BuildRequest{ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil), Tags: []string{tag}})
	require.NoError(t, err)

	s := provision(t, "env | sort", func(spec *WorkerSpec) { spec.Image = tag })
	ctx := testCtx(t)
	info, err := s.c.raw.ContainerInspect(ctx, s.container)
	require.NoError(t, err)
	require.NotNil(t, info.Config.Healthcheck)
	assert.Equal(t, []string{"NONE"}, info.Config.Healthcheck.Test)
	assert.Equal(t, "SIGTERM", info.Config.StopSignal)

	lines, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%v", lines)
	env := map[string]bool{}
	for _, l := range lines {
		env[l] = true
	}
	assert.True(t, env["TOOL_HOME=/opt/tool"], "%v", lines)
	for _, l := range lines {
		assert.NotContains(t, l, "FORGE_FENCING_TOKEN=", "neither the image's token nor forged's reaches the task (the lease API's credential): %v", lines)
	}
	for _, gone := range []string{"FORGE_EVIL=1", "GODEBUG=madvdontneed=0", "GOMAXPROCS=64", "LD_PRELOAD=/x.so", "HTTPS_PROXY=http://10.0.0.1:3128", "http_proxy=http://10.0.0.1:3128"} {
		assert.False(t, env[gone], "%s inherited: %v", gone, lines)
	}
	var path bool
	for _, l := range lines {
		path = path || len(l) > 5 && l[:5] == "PATH="
	}
	assert.True(t, path, "PATH survives: %v", lines)
}
