package preflight

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/messages"
)

// fakeRuntimes answers every probe with probe and counts the probes.
type fakeRuntimes struct {
	probe  RuntimeProbe
	probes int
	asked  []string
}

func (f *fakeRuntimes) ProbeRuntime(_ context.Context, runtime, image string) RuntimeProbe {
	f.probes++
	f.asked = append(f.asked, runtime+" "+image)
	return f.probe
}

const gVisorLog = "[   0.000000] Starting gVisor...\n[   0.561051] Consulting tar man page...\n"

// withRunsc is a rootful engine that registers runsc beside runc.
func withRunsc(args ...string) *fakeEngine {
	e := rootfulEngine()
	e.info.ID = "engine-1"
	e.info.Runtimes = map[string]system.RuntimeWithStatus{
		"runc":  {Runtime: system.Runtime{Path: "runc"}},
		"runsc": {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: args}},
	}
	return e
}

// gvisorOpts is a remote engine (runsc's version is not asked of this
// host's binary) with the floor given.
func gvisorOpts(floor string, prober RuntimeProber, clk clock.Clock) Options {
	return Options{AllowRootful: true, Endpoint: "tcp://engine:2376", IsolationFloor: floor, Runtimes: prober, Clock: clk,
		DetectStorage: func(bool) quota.Facts { return quota.Facts{Mechanism: quota.MechanismNone, Reason: "test"} }}
}

func TestGVisorFloorWithAWorkingRunsc(t *testing.T) {
	p := &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog, Elapsed: 420 * time.Millisecond}}
	r := check(t, withRunsc("--platform=ptrace", "--network=none"), bigHost(), gvisorOpts(messages.IsolationGVisor, p, nil))
	require.True(t, r.Available, r.Reason)
	iso := r.Isolation
	assert.Equal(t, messages.IsolationGVisor, iso.Floor)
	assert.Equal(t, []string{"runc", "runsc"}, iso.Runtimes)
	g := iso.GVisor
	assert.True(t, g.Registered && g.Works, g.Reason)
	assert.Equal(t, "ptrace", g.Platform)
	assert.Equal(t, "/usr/bin/runsc", g.Path)
	assert.Equal(t, int64(420), g.ProbeMillis)
	assert.Equal(t, []string{"runsc " + DefaultGVisorProbeImage}, p.asked)
}

func TestGVisorFloorRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		engine *fakeEngine
		probe  RuntimeProbe
		reason string
	}{
		"not registered": {engine: rootfulEngine(), reason: `registers no runtime "runsc"`},
		// A runtime registered as runsc that is really runc: its kernel
		// log is the host's (or unreadable), without gVisor's banner.
		"not gVisor":   {engine: withRunsc(), probe: RuntimeProbe{KernelLog: "[    0.000000] Linux version 6.1.0\n"}, reason: "its kernel is not gVisor's"},
		"probe failed": {engine: withRunsc(), probe: RuntimeProbe{Err: errors.New(`urpc method "containerManager.StartRoot" failed: EOF`)}, reason: "StartRoot"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &fakeRuntimes{probe: tc.probe}
			r := check(t, tc.engine, bigHost(), gvisorOpts(messages.IsolationGVisor, p, nil))
			assert.False(t, r.Available)
			assert.Equal(t, SandboxIsolationUnavailable, r.Code)
			assert.Contains(t, r.Reason, "--isolation")
			assert.Contains(t, r.Reason, tc.reason)
			assert.False(t, r.Isolation.GVisor.Works)

			// The same facts under the runc floor leave the host available,
			// and no probe container runs there.
			runc := &fakeRuntimes{probe: tc.probe}
			r = check(t, tc.engine, bigHost(), gvisorOpts("", runc, nil))
			assert.True(t, r.Available, r.Reason)
			assert.Equal(t, messages.IsolationRunc, r.Isolation.Floor)
			assert.Zero(t, runc.probes, "a runc floor probes nothing")

			// A runc floor that offers gVisor to dispatches probes it and
			// stays available whatever the probe finds (only the attempts
			// that demand gVisor are refused).
			offered := &fakeRuntimes{probe: tc.probe}
			opts := gvisorOpts("", offered, nil)
			opts.ProbeGVisor = true
			r = check(t, tc.engine, bigHost(), opts)
			assert.True(t, r.Available, r.Reason)
			assert.False(t, r.Isolation.GVisor.Works)
			assert.Contains(t, r.Isolation.GVisor.Reason, tc.reason)
		})
	}
}

// TestGVisorOfferedOnARuncFloorIsProbed: under the runc floor with
// ProbeGVisor, a working runsc is probed and found working (and cached
// like the floor's probe), so dispatches asking for it can have it.
func TestGVisorOfferedOnARuncFloorIsProbed(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	p := &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog}}
	opts := gvisorOpts("", p, clk)
	opts.ProbeGVisor = true
	opts.StateRoot = "/state"
	c := NewChecker(withRunsc("--platform=ptrace"), bigHost(), opts)
	r := c.Check(context.Background())
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, messages.IsolationRunc, r.Isolation.Floor)
	assert.True(t, r.Isolation.GVisor.Works, r.Isolation.GVisor.Reason)
	clk.Advance(time.Minute)
	require.True(t, c.Check(context.Background()).Available)
	assert.Equal(t, 1, p.probes, "one probe of runsc within the TTL (runsc-net is not registered)")
}

// TestGVisorProbeIsCached: one probe per engine and registration within
// the TTL; a changed registration or an expired probe probes again.
func TestGVisorProbeIsCached(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC))
	p := &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog}}
	e := withRunsc("--platform=ptrace")
	opts := gvisorOpts(messages.IsolationGVisor, p, clk)
	opts.StateRoot = "/state"
	c := NewChecker(e, bigHost(), opts)
	ctx := context.Background()
	first := c.Check(ctx)
	require.True(t, first.Available, "%s: %s", first.Code, first.Reason)
	clk.Advance(time.Minute)
	require.True(t, c.Check(ctx).Available)
	assert.Equal(t, 1, p.probes)

	e.info.Runtimes["runsc"] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--platform=kvm"}}}
	p.probe = RuntimeProbe{Err: errors.New("timed out")}
	r := c.Check(ctx)
	assert.Equal(t, 2, p.probes, "a changed registration is probed again")
	assert.Equal(t, SandboxIsolationUnavailable, r.Code)
	assert.Equal(t, "kvm", r.Isolation.GVisor.Platform)

	p.probe = RuntimeProbe{KernelLog: gVisorLog}
	clk.Advance(DefaultIsolationTTL)
	assert.True(t, c.Check(ctx).Available)
	assert.Equal(t, 3, p.probes)
}

func TestPlatformArg(t *testing.T) {
	assert.Equal(t, "ptrace", platformArg([]string{"--network=none", "--platform=ptrace"}))
	assert.Equal(t, "kvm", platformArg([]string{"--platform", "kvm"}))
	assert.Equal(t, "", platformArg(nil))
}

// TestGVisorNetworkRuntimeIsProbedApart: runsc's network registration is
// probed beside runsc under the gvisor floor; when it is missing or fails,
// the host stays available (attempts without a network still run) and the
// facts say why.
func TestGVisorNetworkRuntimeIsProbedApart(t *testing.T) {
	e := withRunsc("--platform=ptrace", "--network=none")
	e.info.Runtimes[DefaultGVisorNetworkRuntime] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: "/usr/local/libexec/forged/runsc-netns", Args: []string{"--platform=ptrace"}}}
	p := &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog}}
	r := check(t, e, bigHost(), gvisorOpts(messages.IsolationGVisor, p, nil))
	require.True(t, r.Available, r.Reason)
	gn := r.Isolation.GVisorNetwork
	assert.True(t, gn.Registered && gn.Works, gn.Reason)
	assert.Equal(t, "ptrace", gn.Platform)
	assert.Equal(t, []string{"runsc " + DefaultGVisorProbeImage, DefaultGVisorNetworkRuntime + " " + DefaultGVisorProbeImage}, p.asked)

	delete(e.info.Runtimes, DefaultGVisorNetworkRuntime)
	r = check(t, e, bigHost(), gvisorOpts(messages.IsolationGVisor, &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog}}, nil))
	require.True(t, r.Available, "a missing network runtime leaves the host available: %s", r.Reason)
	assert.True(t, r.Isolation.GVisor.Works)
	assert.False(t, r.Isolation.GVisorNetwork.Registered)
	assert.Contains(t, r.Isolation.GVisorNetwork.Reason, `registers no runtime "runsc-net"`)
}

// TestGVisorProbeRunsTheOperatorsImage: the probe containers run
// Options.GVisorProbeImage, and a failed probe names it.
func TestGVisorProbeRunsTheOperatorsImage(t *testing.T) {
	const image = "registry.example/forged/probe:2"
	p := &fakeRuntimes{probe: RuntimeProbe{KernelLog: gVisorLog}}
	opts := gvisorOpts(messages.IsolationGVisor, p, nil)
	opts.GVisorProbeImage = image
	r := check(t, withRunsc("--platform=ptrace"), bigHost(), opts)
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, []string{"runsc " + image}, p.asked)

	failed := &fakeRuntimes{probe: RuntimeProbe{Err: errors.New("No such image: " + image)}}
	opts = gvisorOpts(messages.IsolationGVisor, failed, nil)
	opts.GVisorProbeImage = image
	r = check(t, withRunsc("--platform=ptrace"), bigHost(), opts)
	assert.False(t, r.Available)
	assert.Contains(t, r.Reason, "(image "+image+")")
}

func TestCheckProbeImage(t *testing.T) {
	for _, ok := range []string{DefaultGVisorProbeImage, "busybox", "registry.example:5000/team/probe:1.36",
		"busybox@sha256:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("b", 64)} {
		assert.NoError(t, CheckProbeImage(ok), ok)
	}
	for _, bad := range []string{"", "Busybox", "busybox:1 --privileged", "busybox:", "-v /:/host busybox", "busybox@sha256:abc", strings.Repeat("a", 256)} {
		assert.Error(t, CheckProbeImage(bad), bad)
	}
}
