package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// TestIsolationFloorAdmitsNetworksOnlyWithANetworkRuntime: under the
// gvisor floor services and public_allowlist need a working network
// runtime, open_public is refused whatever works, and the runc floor
// refuses none of them.
func TestIsolationFloorAdmitsNetworksOnlyWithANetworkRuntime(t *testing.T) {
	runc := Confinement{Isolation: messages.IsolationRunc}
	withNet := Confinement{Isolation: messages.IsolationGVisor, Runtime: "runsc", NetworkRuntime: "runsc-net"}
	noNet := Confinement{Isolation: messages.IsolationGVisor, Runtime: "runsc", NetworkRuntimeErr: `runtime "runsc-net" does not work: not registered`}
	svc := []contract.Service{{Type: "postgres"}}
	for name, tc := range map[string]struct {
		conf                      Confinement
		allowlist, open, services bool // admitted
	}{
		"runc floor":                         {conf: runc, allowlist: true, open: true, services: true},
		"gvisor floor with runsc-net":        {conf: withNet, allowlist: true, open: false, services: true},
		"gvisor floor without a net runtime": {conf: noNet, allowlist: false, open: false, services: false},
	} {
		t.Run(name, func(t *testing.T) {
			admitted := func(err error) bool {
				if err != nil {
					assert.Equal(t, failure.SandboxIsolationNetworkUnsupport, failure.CodeOf(err), err.Error())
				}
				return err == nil
			}
			assert.Equal(t, tc.allowlist, admitted(checkIsolationNetwork(messages.NetworkPublicAllowlist, tc.conf)), "public_allowlist")
			assert.Equal(t, tc.open, admitted(checkIsolationNetwork(messages.NetworkOpenPublic, tc.conf)), "open_public")
			assert.Equal(t, tc.services, admitted(checkIsolationServices(svc, tc.conf)), "services")
			assert.NoError(t, checkIsolationNetwork(messages.NetworkNone, tc.conf))
			assert.NoError(t, checkIsolationServices(nil, tc.conf))
		})
	}
	err := checkIsolationServices(svc, noNet)
	assert.ErrorContains(t, err, "not registered", "the refusal says why the network runtime does not work")
}

// TestWorkerRuntimeFollowsTheAttemptNetwork: under the gvisor floor a
// worker on an attempt network runs under the network runtime, one
// without under runsc; under runc the engine's default either way.
func TestWorkerRuntimeFollowsTheAttemptNetwork(t *testing.T) {
	g := Confinement{Isolation: messages.IsolationGVisor, Runtime: "runsc", NetworkRuntime: "runsc-net"}
	assert.Equal(t, "runsc", workerRuntime(g, ""))
	assert.Equal(t, "runsc-net", workerRuntime(g, "forge-abc-net"))
	r := Confinement{Isolation: messages.IsolationRunc}
	assert.Empty(t, workerRuntime(r, ""))
	assert.Empty(t, workerRuntime(r, "forge-abc-net"))
}
