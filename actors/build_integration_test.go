package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// Under sandbox_required the Dockerfile's upstream images must be pinned by
// digest and present in the engine: builds never pull.
func TestIntegrationSandboxRequiredDockerfilePolicy(t *testing.T) {
	enginetest.Client(t) // skips, or fails under CI, without an engine
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer func() { _ = docker.Close() }()
	baseID, err := example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(baseID, "sha256:"))

	b := &imageBuilder{docker: docker}
	check := func(src string) error {
		return b.checkPolicy(ctx, sandboxImageJob{policy: messages.PolicySandboxRequired, dockerfile: []byte(src)})
	}
	assert.NoError(t, check("FROM "+baseID+" AS base\nRUN true\nFROM base\n"), "an image id is pinned and present")

	err = check("# the project image\nFROM " + example.BaseImage + "\n")
	assert.Equal(t, failure.SandboxBuildPolicy, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "not pinned by digest")

	absent := "busybox@sha256:" + strings.Repeat("0", 64)
	err = check("FROM " + baseID + "\nCOPY --from=" + absent + " /bin/sh /sh\n")
	assert.Equal(t, failure.SandboxBuildPolicy, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "not present locally")

	assert.NoError(t, b.checkPolicy(ctx, sandboxImageJob{policy: messages.PolicyAdoption, dockerfile: []byte("FROM " + example.BaseImage + "\n")}),
		"the adoption policy allows tags")
}
