package dockerops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/ids"
)

var _ preflight.IsolationProber = (*Client)(nil)

// An attempt that needs no network (today: every attempt, because services
// and egress are refused) runs with NetworkMode "none": its container has
// a loopback interface and nothing else.
//
// An attempt that needs a network (services, the egress proxy) gets an
// isolated one. Docker's Internal flag alone is not isolation: the bridge
// keeps a host address (the gateway), the container keeps a default route
// to it, and every service listening on 0.0.0.0 or [::] on the host answers
// there. The isolated network closes that, with mechanisms that hold on
// every engine forged supports (verified on Debian's docker.io 20.10):
//
//   - the bridge is created with com.docker.network.bridge.inhibit_ipv4, so
//     the host holds no IPv4 address on it: the gateway address IPAM
//     reserves is owned by nobody, ARP for it goes unanswered, and no
//     packet a container sends has a host address as its next hop;
//   - Internal stays set, so the engine also drops forwarded traffic that
//     leaves the subnet;
//   - IPv6 is off on the network and switched off inside every container
//     on it (net.ipv6.conf.{all,default}.disable_ipv6=1), so the bridge's
//     link-local fe80:: address cannot be used either; a task has no
//     CAP_NET_ADMIN to switch it back on, and /proc/sys is read-only;
//   - every worker names its container's own loopback as its DNS server.
//     An explicit loopback nameserver is dialled inside the container's
//     namespace on every engine version, so the embedded resolver forwards
//     nothing to the host or beyond, even on engines where internal
//     networks forward DNS (CVE-2024-29018, fixed in 26.0.0, 25.0.5 and
//     23.0.11; 20.10 is not fixed).
//
// VerifyHostIsolation checks the first property from the host's side, and
// ProbeNetworkIsolation runs that check on a throwaway network for
// preflight, which refuses attempts needing a network when it fails.

// Bridge driver options of an isolated network.
const (
	bridgeInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"
	bridgeMasquerade  = "com.docker.network.bridge.enable_ip_masquerade"
)

// IsolationMechanism names the mechanism isolated networks use, as
// preflight reports it.
const IsolationMechanism = "bridge without host address (inhibit_ipv4), internal, IPv6 off in containers, DNS to the container's loopback"

// SandboxNameserver is every worker's only DNS server: the container's own
// loopback, where nothing answers.
const SandboxNameserver = "127.0.0.1"

// isolatedSysctls switch IPv6 off inside a container on an isolated
// network.
var isolatedSysctls = map[string]string{
	"net.ipv6.conf.all.disable_ipv6":     "1",
	"net.ipv6.conf.default.disable_ipv6": "1",
}

// probeLabel marks preflight's throwaway probe networks. A probe network
// lives for seconds; one older than probeStaleAfter was left by a process
// that died mid-probe, and the next probe removes it.
const (
	probeLabel      = "dev.forge.isolation-probe"
	probeStaleAfter = 5 * time.Minute
)

// IsolatedNetwork is a provisioned isolated network.
type IsolatedNetwork struct {
	ID, Name string
	// Bridge is the host's bridge device (br-<first 12 of the id>).
	Bridge string
	// Subnets are the network's IPv4 subnets.
	Subnets []netip.Prefix
}

// CreateIsolatedNetwork creates an isolated attempt network (see the
// mechanisms above) and checks the engine kept every isolation setting: an
// engine that ignores one is refused, never trusted. It does not check the
// host's side; see VerifyHostIsolation. Failures carry
// failure.SandboxCreateFailed; a network the engine created is left to the
// label-driven teardown.
func (c *Client) CreateIsolatedNetwork(ctx context.Context, name string, labels map[string]string) (IsolatedNetwork, error) {
	id, err := c.createNetwork(ctx, c.provisioner, name, network.CreateOptions{
		Driver:     "bridge",
		Internal:   true,
		EnableIPv6: new(false),
		Options: map[string]string{
			bridgeInhibitIPv4: "true",
			bridgeMasquerade:  "false",
		},
		Labels: maps.Clone(labels),
	})
	if err != nil {
		return IsolatedNetwork{}, err
	}
	inspected, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (network.Inspect, error) {
		return c.provisioner.NetworkInspect(ctx, id, network.InspectOptions{})
	})
	if err != nil {
		return IsolatedNetwork{}, opError(ctx, failure.SandboxCreateFailed, err, "network inspect %s", name)
	}
	n, err := isolatedNetworkOf(inspected)
	if err != nil {
		return IsolatedNetwork{}, failure.Wrap(failure.SandboxCreateFailed, err, "network %s is not isolated: %v", name, err)
	}
	return n, nil
}

// isolatedNetworkOf checks what the engine says about a network it created
// as isolated.
func isolatedNetworkOf(in network.Inspect) (IsolatedNetwork, error) {
	switch {
	case in.Driver != "bridge":
		return IsolatedNetwork{}, fmt.Errorf("driver %q, not bridge", in.Driver)
	case !in.Internal:
		return IsolatedNetwork{}, errors.New("the engine did not keep it internal")
	case in.EnableIPv6:
		return IsolatedNetwork{}, errors.New("the engine enabled IPv6 on it")
	case in.Options[bridgeInhibitIPv4] != "true":
		return IsolatedNetwork{}, fmt.Errorf("the engine did not keep %s", bridgeInhibitIPv4)
	case len(in.ID) < 12:
		return IsolatedNetwork{}, fmt.Errorf("network id %q is too short", in.ID)
	}
	n := IsolatedNetwork{ID: in.ID, Name: in.Name, Bridge: "br-" + in.ID[:12]}
	for _, cfg := range in.IPAM.Config {
		p, err := netip.ParsePrefix(cfg.Subnet)
		if err != nil {
			return IsolatedNetwork{}, fmt.Errorf("subnet %q: %w", cfg.Subnet, err)
		}
		if !p.Addr().Is4() {
			return IsolatedNetwork{}, fmt.Errorf("IPv6 subnet %s", p)
		}
		n.Subnets = append(n.Subnets, p.Masked())
	}
	if len(n.Subnets) == 0 {
		return IsolatedNetwork{}, errors.New("the engine assigned no IPv4 subnet")
	}
	return n, nil
}

// HostInterface is one network interface of the host and its addresses.
type HostInterface struct {
	Name  string
	Addrs []netip.Prefix
}

// LocalInterfaces lists this host's interfaces and addresses.
func LocalInterfaces() ([]HostInterface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list host interfaces: %w", err)
	}
	out := make([]HostInterface, 0, len(ifaces))
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		h := HostInterface{Name: ifc.Name}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			h.Addrs = append(h.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
		}
		out = append(out, h)
	}
	return out, nil
}

// VerifyHostIsolation checks, from the host's side, that no container on n
// has a host address within reach: n's bridge device exists on this host
// and holds no IPv4 address, and no host address lies in n's subnets. It
// can only succeed where forged shares the engine's network namespace (a
// local rootful engine); elsewhere the bridge is not found and isolation
// cannot be guaranteed.
func VerifyHostIsolation(n IsolatedNetwork, host []HostInterface) error {
	var bridge *HostInterface
	for i := range host {
		if host[i].Name == n.Bridge {
			bridge = &host[i]
		}
	}
	if bridge == nil {
		return fmt.Errorf("the bridge %s of network %s is not in forged's network namespace (remote or rootless engine); its isolation cannot be verified", n.Bridge, n.Name)
	}
	for _, a := range bridge.Addrs {
		if a.Addr().Is4() {
			return fmt.Errorf("the bridge %s holds the host address %s", n.Bridge, a)
		}
	}
	for _, ifc := range host {
		for _, a := range ifc.Addrs {
			for _, s := range n.Subnets {
				if s.Contains(a.Addr()) {
					return fmt.Errorf("the host address %s on %s lies in the network's subnet %s", a.Addr(), ifc.Name, s)
				}
			}
		}
	}
	return nil
}

// ProbeNetworkIsolation creates a throwaway isolated network, checks it
// with VerifyHostIsolation against this host's interfaces, and removes it
// on a context that survives ctx's cancellation. It reports rather than
// returns failures; it makes *Client a preflight.IsolationProber.
func (c *Client) ProbeNetworkIsolation(ctx context.Context) preflight.NetworkIsolation {
	interfaces := c.hostInterfaces
	if interfaces == nil {
		interfaces = LocalInterfaces
	}
	res := preflight.NetworkIsolation{Mechanism: IsolationMechanism, Nameserver: SandboxNameserver}
	c.removeStaleProbes(ctx)
	name := "forge-isolation-probe-" + strings.ReplaceAll(ids.NewUUID(), "-", "")
	n, err := c.CreateIsolatedNetwork(ctx, name, map[string]string{probeLabel: "true"})
	defer func() {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.opts.Timeouts.Remove)
		defer cancel()
		_ = callErr(cleanup, c, c.opts.Timeouts.Remove, writeCall, func(ctx context.Context) error {
			if err := c.provisioner.NetworkRemove(ctx, name); err != nil && !cerrdefs.IsNotFound(err) {
				return err
			}
			return nil
		})
	}()
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	host, err := interfaces()
	if err == nil {
		err = VerifyHostIsolation(n, host)
	}
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	res.Verified = true
	return res
}

// removeStaleProbes removes the probe networks older than probeStaleAfter
// (best effort: a failure leaves them for the next probe).
func (c *Client) removeStaleProbes(ctx context.Context) {
	list, err := call(ctx, c, c.opts.Timeouts.List, readCall, func(ctx context.Context) ([]network.Summary, error) {
		return c.provisioner.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", probeLabel+"=true"))})
	})
	if err != nil {
		return
	}
	for _, n := range list {
		if n.Labels[probeLabel] != "true" || n.Created.IsZero() || time.Since(n.Created) < probeStaleAfter {
			continue
		}
		_ = callErr(ctx, c, c.opts.Timeouts.Remove, writeCall, func(ctx context.Context) error {
			if err := c.provisioner.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
				return err
			}
			return nil
		})
	}
}
