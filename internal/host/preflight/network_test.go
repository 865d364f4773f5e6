package preflight

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// fakeProber answers isolation probes with result, counting them.
type fakeProber struct {
	result NetworkIsolation
	probes atomic.Int32
}

func (f *fakeProber) ProbeNetworkIsolation(context.Context) NetworkIsolation {
	f.probes.Add(1)
	return f.result
}

func verifiedProber() *fakeProber {
	return &fakeProber{result: NetworkIsolation{Mechanism: "bridge without host address", Verified: true, Nameserver: "127.0.0.1"}}
}

func TestNetworkFactsInTheReport(t *testing.T) {
	prober := verifiedProber()
	e := rootfulEngine()
	e.info.ID = "engine-1"
	c := NewChecker(e, bigHost(), Options{AllowRootful: true, Isolation: prober})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }

	r := c.Check(context.Background())
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, "none", r.Network.DefaultMode)
	assert.True(t, r.Network.Isolation.Verified)
	assert.Equal(t, "bridge without host address", r.Network.Isolation.Mechanism)
	assert.Empty(t, r.Network.Code)
	assert.NoError(t, r.Network.NetworkErr())
	assert.Equal(t, now, r.Network.ProbedAt)
	assert.True(t, r.Network.DNS.InternalForwardingFixed, "27.3.1 is fixed")
	assert.Contains(t, r.Network.DNS.Note, "127.0.0.1")

	// The probe is kept for the same engine within the TTL ...
	now = now.Add(DefaultIsolationTTL - time.Second)
	c.Check(context.Background())
	assert.Equal(t, int32(1), prober.probes.Load())
	// ... redone after it ...
	now = now.Add(time.Second)
	c.Check(context.Background())
	assert.Equal(t, int32(2), prober.probes.Load())
	// ... and at once for another engine (a restart into another version).
	e.info.ID = "engine-2"
	c.Check(context.Background())
	assert.Equal(t, int32(3), prober.probes.Load())
}

func TestUnverifiedIsolationRefusesOnlyNetworkAttempts(t *testing.T) {
	prober := &fakeProber{result: NetworkIsolation{Mechanism: "m", Reason: "the bridge br-x holds the host address 172.30.0.1/16"}}
	e := rootfulEngine()
	e.info.ServerVersion, e.version.Version = "20.10.24+dfsg1", "20.10.24+dfsg1"
	r := NewChecker(e, bigHost(), Options{AllowRootful: true, Isolation: prober}).Check(context.Background())
	assert.True(t, r.Available, "attempts without a network still run")
	assert.Equal(t, failure.SandboxNetworkIsolation, r.Network.Code)
	err := r.Network.NetworkErr()
	assert.Equal(t, failure.SandboxNetworkIsolation, failure.CodeOf(err))
	assert.Contains(t, err.Error(), "holds the host address")
	assert.False(t, r.Network.DNS.InternalForwardingFixed)
	assert.Contains(t, r.Network.DNS.Note, "engine 20.10.24+dfsg1 forwards DNS from internal networks (CVE-2024-29018")

	// No prober: nothing is verified.
	r = NewChecker(rootfulEngine(), bigHost(), Options{AllowRootful: true}).Check(context.Background())
	assert.Equal(t, failure.SandboxNetworkIsolation, r.Network.Code)
	assert.Contains(t, r.Network.Isolation.Reason, "no isolation prober")

	// An unreachable engine verifies nothing either.
	r = NewChecker(nil, bigHost(), Options{}).Check(context.Background())
	assert.Equal(t, failure.SandboxNetworkIsolation, r.Network.Code)
}

func TestCancelledProbeVerifiesNothing(t *testing.T) {
	prober := verifiedProber()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := NewChecker(rootfulEngine(), bigHost(), Options{AllowRootful: true, Isolation: prober})
	r := c.networkFacts(ctx, "engine-1", "27.3.1")
	assert.False(t, r.Isolation.Verified)
	assert.Equal(t, failure.SandboxNetworkIsolation, r.Code)
	r = c.networkFacts(context.Background(), "engine-1", "27.3.1")
	assert.True(t, r.Isolation.Verified, "the next check probes again")
	assert.Equal(t, int32(2), prober.probes.Load())
}

func TestInternalDNSForwardingFixed(t *testing.T) {
	for version, fixed := range map[string]bool{
		"20.10.24+dfsg1": false, "20.10.24": false, "23.0.10": false, "23.0.11": true, "23.1.0": true,
		"24.0.9": false, "25.0.4": false, "25.0.5": true, "25.1.0": true, "26.0.0": true, "27.3.1": true,
		"28.5.2": true, "v26.1.4": true, "26.0.0-rc1": false, "26.0.1-rc1": true, "25.0.5-beta": false, "1.2.3.4": false, "-1.0": false, "": false, "garbage": false, "1.13.1": false,
	} {
		assert.Equal(t, fixed, InternalDNSForwardingFixed(version), version)
	}
}

func FuzzInternalDNSForwardingFixed(f *testing.F) {
	for _, s := range []string{"20.10.24+dfsg1", "25.0.5", "v26", "23.0.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = InternalDNSForwardingFixed(s) // never panics
	})
}
