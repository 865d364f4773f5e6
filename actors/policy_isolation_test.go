package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// TestServiceRuntimeIsTheOperators: services run under the network
// runtime only for an attempt under gVisor on a runner that chose it
// (--gvisor-services), whether gVisor is the floor or the dispatch's.
func TestServiceRuntimeIsTheOperators(t *testing.T) {
	g := Confinement{Isolation: messages.IsolationGVisor, Runtime: "runsc", NetworkRuntime: "runsc-net"}
	assert.Empty(t, serviceRuntime(g), "services stay under runc unless the operator chose otherwise")
	g.GVisorServices = true
	assert.Equal(t, "runsc-net", serviceRuntime(g))
	r := Confinement{Isolation: messages.IsolationRunc, GVisorServices: true, OfferGVisor: true, GVisorRuntime: "runsc", NetworkRuntime: "runsc-net"}
	assert.Empty(t, serviceRuntime(r), "a runc attempt's services run under runc")
	asked := &messages.Dispatch{Sandbox: messages.SandboxSpec{Isolation: messages.IsolationGVisor}}
	got, err := attemptConfinement(asked, r)
	require.NoError(t, err)
	assert.Equal(t, "runsc-net", serviceRuntime(got), "a dispatch that gets gVisor on a runc floor gets its services there too")
}

// TestAttemptIsolationPolicy: the isolation an attempt runs under is the
// floor, raised to gVisor when the dispatch asks for it (and the runner
// offers it) or when it is sandbox_required under
// --sandbox-required-isolation gvisor; never below the floor, and never
// a silent runc when gVisor is demanded but does not work.
func TestAttemptIsolationPolicy(t *testing.T) {
	const works, broken = true, false
	conf := func(floor string, offer bool, required string, gvisorWorks bool) Confinement {
		c := Confinement{Isolation: floor, OfferGVisor: offer, RequiredIsolation: required,
			NetworkRuntime: "runsc-net"}
		if floor == messages.IsolationGVisor {
			c.Runtime = "runsc"
		}
		if gvisorWorks {
			c.GVisorRuntime = "runsc"
		} else {
			c.GVisorErr = `runtime "runsc" does not work: the engine registers no runtime "runsc"`
		}
		return c
	}
	const (
		runc, gvisor = messages.IsolationRunc, messages.IsolationGVisor
		required     = messages.PolicySandboxRequired
		adoption     = messages.PolicyAdoption
	)
	for name, tc := range map[string]struct {
		conf     Confinement
		asked    string // sandbox.isolation
		policy   string // sandbox.executionPolicy
		runtime  string // the worker's runtime when admitted
		gvisor   bool   // runs under gVisor
		refusal  failure.Code
		mentions string
	}{
		"runc floor, nothing asked":                          {conf: conf(runc, false, "", works), policy: adoption},
		"runc floor, runc asked":                             {conf: conf(runc, true, "", works), asked: runc, policy: adoption},
		"runc floor, gvisor asked and offered":               {conf: conf(runc, true, "", works), asked: gvisor, policy: adoption, runtime: "runsc", gvisor: true},
		"runc floor, gvisor asked, not offered":              {conf: conf(runc, false, "", works), asked: gvisor, policy: adoption, refusal: failure.SandboxIsolationUnavailable, mentions: "--allow-gvisor-dispatch"},
		"runc floor, gvisor asked, offered, runsc broken":    {conf: conf(runc, true, "", broken), asked: gvisor, policy: adoption, refusal: failure.SandboxIsolationUnavailable, mentions: "registers no runtime"},
		"runc floor, sandbox_required, runc demanded":        {conf: conf(runc, false, runc, works), policy: required},
		"runc floor, sandbox_required, gvisor demanded":      {conf: conf(runc, false, gvisor, works), policy: required, runtime: "runsc", gvisor: true},
		"runc floor, sandbox_required demands, runsc broken": {conf: conf(runc, false, gvisor, broken), policy: required, refusal: failure.SandboxIsolationUnavailable, mentions: "--sandbox-required-isolation"},
		"runc floor, gvisor demanded, adoption dispatch":     {conf: conf(runc, false, gvisor, works), policy: adoption},
		"runc floor, sandbox_required asks gvisor itself":    {conf: conf(runc, false, gvisor, works), asked: gvisor, policy: required, runtime: "runsc", gvisor: true},
		"runc floor, sandbox_required asks runc, demanded":   {conf: conf(runc, false, gvisor, works), asked: runc, policy: required, runtime: "runsc", gvisor: true},
		"gvisor floor, nothing asked":                        {conf: conf(gvisor, false, "", works), policy: adoption, runtime: "runsc", gvisor: true},
		"gvisor floor, gvisor asked":                         {conf: conf(gvisor, false, "", works), asked: gvisor, policy: required, runtime: "runsc", gvisor: true},
		"gvisor floor, runc asked":                           {conf: conf(gvisor, true, "", works), asked: runc, policy: adoption, refusal: failure.SandboxIsolationBelowFloor, mentions: "sandbox.isolation"},
		"gvisor floor, runc asked, sandbox_required":         {conf: conf(gvisor, true, gvisor, works), asked: runc, policy: required, refusal: failure.SandboxIsolationBelowFloor},
	} {
		t.Run(name, func(t *testing.T) {
			d := &messages.Dispatch{Sandbox: messages.SandboxSpec{Isolation: tc.asked, ExecutionPolicy: tc.policy}}
			got, err := attemptConfinement(d, tc.conf)
			if tc.refusal != "" {
				assert.Equal(t, tc.refusal, failure.CodeOf(err), "%v", err)
				if tc.mentions != "" {
					assert.ErrorContains(t, err, tc.mentions)
				}
				return
			}
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, tc.gvisor, gVisorFloor(got), "runs under gVisor")
			assert.Equal(t, tc.runtime, workerRuntime(got, ""), "the worker's runtime without a network")
			if tc.gvisor {
				assert.Equal(t, "runsc-net", workerRuntime(got, "forge-abc-net"), "the worker's runtime on an attempt network")
				assert.Error(t, checkIsolationNetwork(messages.NetworkOpenPublic, got), "open_public is refused under gVisor however it was chosen")
			}
		})
	}
}
