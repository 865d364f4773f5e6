package dockerops

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/preflight"
)

func TestCreateIsolatedNetworkAsksForIsolation(t *testing.T) {
	f := &fakeProvisioner{}
	labels := map[string]string{"dev.forge.managed": "true"}
	n, err := newClient(fastOptions(), f).CreateIsolatedNetwork(context.Background(), "forge-x", labels)
	require.NoError(t, err)
	opts := f.created["forge-x"]
	assert.True(t, opts.Internal)
	assert.Equal(t, "bridge", opts.Driver)
	require.NotNil(t, opts.EnableIPv6)
	assert.False(t, *opts.EnableIPv6)
	assert.Equal(t, "true", opts.Options["com.docker.network.bridge.inhibit_ipv4"], "the host holds no address on the bridge")
	assert.Equal(t, "false", opts.Options["com.docker.network.bridge.enable_ip_masquerade"])
	assert.Equal(t, labels, opts.Labels)
	assert.Equal(t, IsolatedNetwork{
		ID: fakeNetworkID("forge-x"), Name: "forge-x", Bridge: "br-0123456789ab",
		Subnets: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
	}, n)
}

func TestIsolatedNetworkOfRefusesWhatTheEngineDidNotKeep(t *testing.T) {
	good := network.Inspect{
		ID: "0123456789abcdef", Name: "n", Driver: "bridge", Internal: true,
		Options: map[string]string{bridgeInhibitIPv4: "true"},
		IPAM:    network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.30.0.0/16"}}},
	}
	_, err := isolatedNetworkOf(good)
	require.NoError(t, err)
	for name, tweak := range map[string]func(*network.Inspect){
		"not internal":     func(in *network.Inspect) { in.Internal = false },
		"ipv6 enabled":     func(in *network.Inspect) { in.EnableIPv6 = true },
		"inhibit dropped":  func(in *network.Inspect) { in.Options = map[string]string{} },
		"inhibit false":    func(in *network.Inspect) { in.Options = map[string]string{bridgeInhibitIPv4: "false"} },
		"other driver":     func(in *network.Inspect) { in.Driver = "macvlan" },
		"no subnet":        func(in *network.Inspect) { in.IPAM.Config = nil },
		"ipv6 subnet":      func(in *network.Inspect) { in.IPAM.Config = []network.IPAMConfig{{Subnet: "fd00:1::/64"}} },
		"malformed subnet": func(in *network.Inspect) { in.IPAM.Config = []network.IPAMConfig{{Subnet: "nope"}} },
		"short id":         func(in *network.Inspect) { in.ID = "abc" },
	} {
		in := good
		in.Options = map[string]string{bridgeInhibitIPv4: "true"}
		tweak(&in)
		_, err := isolatedNetworkOf(in)
		assert.Error(t, err, name)
	}
}

func TestVerifyHostIsolation(t *testing.T) {
	n := IsolatedNetwork{Name: "n", Bridge: "br-0123456789ab", Subnets: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}}
	p := netip.MustParsePrefix
	host := []HostInterface{
		{Name: "lo", Addrs: []netip.Prefix{p("127.0.0.1/8"), p("::1/128")}},
		{Name: "eth0", Addrs: []netip.Prefix{p("192.0.2.2/24"), p("fd00::2/64")}},
		{Name: "br-0123456789ab", Addrs: []netip.Prefix{p("fe80::42:1/64")}},
	}
	require.NoError(t, VerifyHostIsolation(n, host), "a link-local IPv6 address is unusable from containers with IPv6 off")

	withGateway := append([]HostInterface(nil), host...)
	withGateway[2] = HostInterface{Name: "br-0123456789ab", Addrs: []netip.Prefix{p("172.30.0.1/16")}}
	assert.ErrorContains(t, VerifyHostIsolation(n, withGateway), "holds the host address 172.30.0.1/16")

	otherBridgeAddr := append([]HostInterface(nil), host...)
	otherBridgeAddr[2] = HostInterface{Name: "br-0123456789ab", Addrs: []netip.Prefix{p("10.9.9.9/8")}}
	assert.Error(t, VerifyHostIsolation(n, otherBridgeAddr), "any IPv4 address on the bridge is a next hop to the host")

	inSubnet := append(host, HostInterface{Name: "tun0", Addrs: []netip.Prefix{p("172.30.5.5/32")}})
	assert.ErrorContains(t, VerifyHostIsolation(n, inSubnet), "lies in the network's subnet")

	assert.ErrorContains(t, VerifyHostIsolation(n, host[:2]), "cannot be verified", "a bridge forged cannot see is not verified")
}

func TestProbeNetworkIsolation(t *testing.T) {
	p := netip.MustParsePrefix
	f := &fakeProvisioner{}
	c := newClient(fastOptions(), f)
	var probed string
	c.hostInterfaces = func() ([]HostInterface, error) {
		for name := range f.created {
			probed = name
		}
		return []HostInterface{{Name: "br-0123456789ab", Addrs: []netip.Prefix{p("fe80::1/64")}}}, nil
	}
	res := c.ProbeNetworkIsolation(context.Background())
	assert.Equal(t, preflight.NetworkIsolation{Mechanism: IsolationMechanism, Verified: true, Nameserver: "127.0.0.1"}, res)
	assert.Equal(t, []string{probed}, f.removed, "the probe network is removed")
	assert.Equal(t, "true", f.created[probed].Labels[probeLabel])

	f = &fakeProvisioner{}
	c = newClient(fastOptions(), f)
	c.hostInterfaces = func() ([]HostInterface, error) {
		return []HostInterface{{Name: "br-0123456789ab", Addrs: []netip.Prefix{p("172.30.0.1/16")}}}, nil
	}
	res = c.ProbeNetworkIsolation(context.Background())
	assert.False(t, res.Verified)
	assert.Contains(t, res.Reason, "holds the host address")
	assert.Len(t, f.removed, 1)

	f = &fakeProvisioner{networkErrs: []error{errors.New("engine says no")}}
	res = newClient(fastOptions(), f).ProbeNetworkIsolation(context.Background())
	assert.False(t, res.Verified)
	assert.Contains(t, res.Reason, "engine says no")
	assert.Len(t, f.removed, 1, "removal is attempted whatever happened")

	// A probe network left by a process that died mid-probe is removed by
	// the next probe; a young one (another process's probe) is not.
	f = &fakeProvisioner{listed: []network.Summary{
		{ID: "old", Labels: map[string]string{probeLabel: "true"}, Created: time.Now().Add(-time.Hour)},
		{ID: "young", Labels: map[string]string{probeLabel: "true"}, Created: time.Now()},
	}}
	newClient(fastOptions(), f).ProbeNetworkIsolation(context.Background())
	assert.Contains(t, f.removed, "old")
	assert.NotContains(t, f.removed, "young")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &fakeProvisioner{}
	res = newClient(fastOptions(), f).ProbeNetworkIsolation(ctx)
	assert.False(t, res.Verified)
	assert.NotEmpty(t, res.Reason)
	assert.Len(t, f.removed, 1, "the removal survives the caller's cancellation")
}
