package preflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// TestRealEngineGVisorProbe probes this machine's engine, which must have
// gVisor's runsc registered as "runsc" (scripts/ensure-runsc.sh): it fails,
// never skips, without it. The probe container runs the example's busybox
// image under runsc and its kernel must announce gVisor; runc, registered
// under the floor's name, must not pass for it; a name the engine does not
// register makes the gvisor floor's host unavailable.
func TestRealEngineGVisorProbe(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer docker.Close()
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)
	require.Equal(t, example.BaseImage, preflight.DefaultGVisorProbeImage)

	check := func(runtime string) preflight.Report {
		return preflight.NewChecker(cli, nil, preflight.Options{AllowRootful: true, Endpoint: cli.DaemonHost(), StateRoot: t.TempDir(),
			IsolationFloor: messages.IsolationGVisor, GVisorRuntime: runtime, Runtimes: docker}).Check(ctx)
	}

	r := check("")
	t.Logf("isolation facts: %+v", r.Isolation)
	g := r.Isolation.GVisor
	require.True(t, g.Registered, "runsc is not registered with the engine (run scripts/ensure-runsc.sh): %s", g.Reason)
	assert.Contains(t, r.Isolation.Runtimes, "runsc")
	assert.Contains(t, r.Isolation.Runtimes, "runc")
	require.True(t, g.Works, g.Reason)
	assert.NotEqual(t, failure.SandboxIsolationUnavailable, r.Code, r.Reason)
	assert.Equal(t, "ptrace", g.Platform)
	if cli.DaemonHost() == "unix:///var/run/docker.sock" {
		assert.NotEmpty(t, g.Version, "the local runsc answers --version")
	}
	assert.Positive(t, g.ProbeMillis)

	r = check("runc")
	assert.False(t, r.Isolation.GVisor.Works, "runc passed for gVisor")
	assert.Equal(t, failure.SandboxIsolationUnavailable, r.Code, r.Reason)

	r = check("forged-test-runtime-not-registered")
	assert.False(t, r.Available)
	assert.Equal(t, failure.SandboxIsolationUnavailable, r.Code, r.Reason)
	assert.False(t, r.Isolation.GVisor.Registered)
}
