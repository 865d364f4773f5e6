package preflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// TestRealEngineNetworkIsolation probes this machine's engine: on a local
// rootful engine the isolated network is verified from the host's side;
// elsewhere it must be reported unverified, with the refusal code.
func TestRealEngineNetworkIsolation(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer docker.Close()

	r := preflight.NewChecker(cli, nil, preflight.Options{AllowRootful: true, Endpoint: cli.DaemonHost(), StateRoot: t.TempDir(), Isolation: docker}).Check(ctx)
	require.True(t, r.Engine.Reachable, r.Reason)
	t.Logf("network facts: %+v", r.Network)
	assert.Equal(t, "none", r.Network.DefaultMode)
	assert.Equal(t, dockerops.IsolationMechanism, r.Network.Isolation.Mechanism)
	assert.Equal(t, preflight.InternalDNSForwardingFixed(r.Engine.ServerVersion), r.Network.DNS.InternalForwardingFixed)
	assert.Contains(t, r.Network.DNS.Note, r.Engine.ServerVersion)
	local := cli.DaemonHost() == "unix:///var/run/docker.sock"
	if local && !r.Features.Rootless {
		assert.True(t, r.Network.Isolation.Verified, r.Network.Isolation.Reason)
		assert.NoError(t, r.Network.NetworkErr())
	}
	if !r.Network.Isolation.Verified {
		assert.Equal(t, failure.SandboxNetworkIsolation, failure.CodeOf(r.Network.NetworkErr()))
	}
}
