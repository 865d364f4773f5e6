package dockerops

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// A netns guard puts L3 rules below the egress proxy's own policy (see
// egress.GuardRules and docs/security.md, "Egress below squid"): a
// short-lived container that joins a running container's network
// namespace (NetworkMode container:<id>) as root with only CAP_NET_ADMIN,
// loads an nftables script from its stdin in one transaction, and exits.
// The rules belong to the namespace, so they hold for every process in it
// for as long as it lives, and none of those processes (the proxy as uid
// 13, the worker as uid 10001, all without capabilities) can change them.
// The guard image is the egress catalogue image, which carries nft.
//
// An open_public worker has no namespace of its own before it starts, and
// it starts its task at once: it joins the namespace of a netns holder
// (StartNetnsHolder), a container that only sleeps, guarded before the
// worker is created.

// NetGuard describes one guard run.
type NetGuard struct {
	// Name is the guard container's name; Image carries /usr/sbin/nft.
	Name, Image string
	// Rules is the nft script (egress.GuardRules).
	Rules        string
	Labels       map[string]string
	SecurityOpts []string
}

// Limits of a guard or holder container.
const (
	guardMemoryBytes = 32 << 20
	guardPIDs        = 16
	guardNanoCPUs    = 250_000_000
	guardRunCap      = 30 * time.Second
	holderUID        = 65534
)

// guardScript loads the rules from stdin, then lists the table: a load
// that did not take fails the run.
const guardScript = `nft -f /dev/stdin && nft list table inet forge_guard >/dev/null`

// NetGuardContainerConfig returns the guard container's configuration in
// target's network namespace.
func NetGuardContainerConfig(g NetGuard, target string) (*container.Config, *container.HostConfig) {
	pids := int64(guardPIDs)
	cfg := &container.Config{
		Image: g.Image, User: "0:0", Labels: maps.Clone(g.Labels),
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"},
		Entrypoint: []string{"/bin/sh", "-ec", guardScript}, Cmd: []string{},
		AttachStdin: true, AttachStdout: true, AttachStderr: true, OpenStdin: true, StdinOnce: true,
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode("container:" + target),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		CapAdd:         []string{"NET_ADMIN"},
		SecurityOpt:    append([]string{"no-new-privileges"}, g.SecurityOpts...),
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory: guardMemoryBytes, MemorySwap: guardMemoryBytes, NanoCPUs: guardNanoCPUs, PidsLimit: &pids,
		},
	}
	return cfg, host
}

// GuardNetns loads g's rules into the network namespace of the running
// container target and removes the guard container. Failures carry
// failure.SandboxEgressFailed.
func (c *Client) GuardNetns(ctx context.Context, target string, g NetGuard) error {
	if g.Name == "" || g.Image == "" || g.Rules == "" || target == "" {
		return failure.New(failure.SandboxEgressFailed, "a netns guard needs a name, an image, rules and a target container")
	}
	cfg, host := NetGuardContainerConfig(g, target)
	if err := c.asHelper(ctx, g.Image, cfg, host); err != nil {
		return failure.Wrap(failure.SandboxEgressFailed, err, "netns guard create")
	}
	id, err := c.createContainer(ctx, g.Name, g.Labels, cfg, host, &network.NetworkingConfig{})
	if err != nil {
		return failure.Wrap(failure.SandboxEgressFailed, err, "netns guard create")
	}
	defer func() { _ = c.removeHelper(ctx, id) }()
	res, err := c.RunAttached(ctx, id, []byte(g.Rules), nil, RunLimits{MaxDuration: guardRunCap, MaxStdoutBytes: 64 << 10, MaxStderrBytes: 64 << 10, StderrTailBytes: 1024, StopGrace: time.Second})
	if err != nil {
		return failure.Wrap(failure.SandboxEgressFailed, err, "netns guard of %s", shortID(target))
	}
	if res.ExitCode != 0 {
		return failure.New(failure.SandboxEgressFailed, "the netns guard of %s exited with code %d: %s", shortID(target), res.ExitCode, text.OneLine(res.Stderr, 300))
	}
	return nil
}

// NetnsHolder describes the container whose network namespace an
// open_public worker joins.
type NetnsHolder struct {
	Name, Image, Network string
	Labels               map[string]string
	SecurityOpts         []string
}

// Sidecar returns the holder's spec: a sidecar that only sleeps (as
// nobody), on the routed attempt network, with the engine's resolver (the
// worker shares its resolv.conf).
func (h NetnsHolder) Sidecar() (SidecarSpec, error) {
	if h.Name == "" || h.Image == "" || h.Network == "" {
		return SidecarSpec{}, failure.New(failure.SandboxEgressFailed, "a netns holder needs a name, an image and a network")
	}
	return SidecarSpec{
		Name: h.Name, Image: h.Image, User: fmt.Sprintf("%d:%d", holderUID, holderUID),
		Entrypoint: []string{"/bin/sleep", "infinity"}, Cmd: []string{}, Labels: h.Labels, Network: h.Network,
		MemoryBytes: guardMemoryBytes, NanoCPUs: guardNanoCPUs, PIDs: guardPIDs, SecurityOpts: h.SecurityOpts,
		Code: failure.SandboxEgressFailed, What: "netns holder", Helper: true,
	}, nil
}

// HeldNetns is a started netns holder: its id, and its subnet and gateway
// on the holder's network.
type HeldNetns struct {
	ID      string
	Subnet  netip.Prefix
	Gateway netip.Addr
}

// StartNetnsHolder creates and starts the holder and returns it (its id
// also with an error, once it was created). Failures carry
// failure.SandboxEgressFailed.
func (c *Client) StartNetnsHolder(ctx context.Context, h NetnsHolder) (HeldNetns, error) {
	id, err := c.CreateSidecar(ctx, h)
	held := HeldNetns{ID: id}
	if err != nil {
		return held, err
	}
	inspected, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (container.InspectResponse, error) {
		return c.creator.ContainerInspect(ctx, id)
	})
	if err != nil {
		return held, opError(ctx, failure.SandboxEgressFailed, err, "netns holder inspect")
	}
	if inspected.NetworkSettings != nil {
		if ep := inspected.NetworkSettings.Networks[h.Network]; ep != nil {
			if a, err := netip.ParseAddr(ep.IPAddress); err == nil {
				held.Subnet = netip.PrefixFrom(a, ep.IPPrefixLen).Masked()
			}
			held.Gateway, _ = netip.ParseAddr(ep.Gateway)
		}
	}
	if !held.Subnet.IsValid() || !held.Gateway.IsValid() {
		return held, failure.New(failure.SandboxEgressFailed, "the netns holder %s has no address or gateway on %s", h.Name, h.Network)
	}
	return held, nil
}
