package dockerops

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/failure"
)

// The egress proxy (networkPolicy.mode public_allowlist; see the egress
// package for its policy) is a sidecar (sidecar.go), the only container on
// both the attempt's isolated network and the attempt's egress network, a
// plain bridge with a route out (no other member, inter-container traffic
// off, IPv6 off), whose network namespace is guarded by L3 rules before it
// is ready (netguard.go). It runs squid hardened like a service container, as
// Debian's proxy user (uid 13), with tmpfs for what squid writes. Its entrypoint writes the configuration and the hosts file
// from its environment into its tmpfs and execs squid. Unlike the other
// containers it keeps a log (json-file, bounded at 1 MiB): squid writes its
// access log to stdout, which forged follows (FollowLogLines). It resolves
// names through the engine's embedded resolver, which forwards to the
// host's resolvers from the egress network.

// sidecarAPI is what sidecars need beyond creating and starting a
// container: the egress proxy's networks and joins, and its log.
type sidecarAPI interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, network string, options network.InspectOptions) (network.Inspect, error)
	NetworkConnect(ctx context.Context, network, container string, config *network.EndpointSettings) error
	ContainerLogs(ctx context.Context, container string, options container.LogsOptions) (io.ReadCloser, error)
}

// Bounds of the egress proxy container.
const (
	egressPIDs        = 128
	egressNanoCPUs    = 500_000_000
	egressLogMaxSize  = "1m"
	egressRunTmpfs    = "rw,nosuid,nodev,noexec,size=16m,uid=13,gid=13,mode=0700"
	egressSquidTmpfs  = "rw,nosuid,nodev,noexec,size=64m,uid=13,gid=13,mode=0700"
	egressStartScript = `umask 077 && printf '%s' "$FORGE_EGRESS_CONF" >"$FORGE_EGRESS_DIR/squid.conf" && printf '%s' "$FORGE_EGRESS_HOSTS" >"$FORGE_EGRESS_DIR/hosts" && unset FORGE_EGRESS_CONF FORGE_EGRESS_HOSTS && exec squid -N -f "$FORGE_EGRESS_DIR/squid.conf"`
)

// EgressSpec describes the egress proxy container.
type EgressSpec struct {
	Name, Image string
	// EgressNetwork is the attempt's egress network (the proxy's route
	// out); AttemptNetwork the attempt's isolated network, joined under
	// Alias; Upstreams further networks the operator names.
	EgressNetwork, AttemptNetwork, Alias string
	Upstreams                            []string
	// UID runs squid (never 0); RunDir is its tmpfs, where the entrypoint
	// writes Config (squid.conf) and Hosts (its hosts file).
	UID           int
	RunDir        string
	Config, Hosts string
	Labels        map[string]string
	SecurityOpts  []string
	MemoryBytes   int64
	// Guard is loaded into the proxy's network namespace once it started
	// (netguard.go): the L3 rules below squid's own policy.
	Guard NetGuard
}

func (s EgressSpec) validate() error {
	switch {
	case s.Name == "", s.Image == "", s.EgressNetwork == "", s.AttemptNetwork == "", s.Alias == "", s.RunDir == "", s.Config == "":
		return fmt.Errorf("egress spec needs a name, an image, both networks, an alias, a run directory and a configuration")
	case s.UID <= 0:
		return fmt.Errorf("the egress proxy must not run as root")
	case s.MemoryBytes <= 0:
		return fmt.Errorf("the egress proxy needs a memory limit")
	case s.Guard.Name == "" || s.Guard.Image == "" || s.Guard.Rules == "":
		return fmt.Errorf("the egress proxy needs its netns guard")
	}
	return nil
}

// Sidecar returns the proxy's container spec: created on its egress
// network, then joined to the attempt network (under its alias) and the
// upstream networks before it starts.
func (s EgressSpec) Sidecar() (SidecarSpec, error) {
	if err := s.validate(); err != nil {
		return SidecarSpec{}, failure.Wrap(failure.SandboxEgressFailed, err, "egress proxy create")
	}
	return s.sidecar(), nil
}

func (s EgressSpec) sidecar() SidecarSpec {
	joins := []NetworkJoin{{Network: s.AttemptNetwork, Aliases: []string{s.Alias}}}
	for _, u := range s.Upstreams {
		joins = append(joins, NetworkJoin{Network: u})
	}
	guard := s.Guard
	return SidecarSpec{
		Guard: &guard,
		Name:  s.Name, Image: s.Image, User: fmt.Sprintf("%d:%d", s.UID, s.UID),
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
			"FORGE_EGRESS_DIR=" + s.RunDir, "FORGE_EGRESS_CONF=" + s.Config, "FORGE_EGRESS_HOSTS=" + s.Hosts,
		},
		Labels:     s.Labels,
		Entrypoint: []string{"/bin/sh", "-c", egressStartScript},
		Cmd:        []string{},
		Tmpfs: map[string]string{
			s.RunDir:           egressRunTmpfs,
			"/tmp":             egressSquidTmpfs,
			"/var/spool/squid": egressSquidTmpfs,
			"/var/log/squid":   egressRunTmpfs,
			"/run/squid":       egressRunTmpfs,
		},
		Network: s.EgressNetwork, Joins: joins,
		MemoryBytes: s.MemoryBytes, NanoCPUs: egressNanoCPUs, PIDs: egressPIDs, SecurityOpts: s.SecurityOpts,
		Log:  container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": egressLogMaxSize, "max-file": "1"}},
		Code: failure.SandboxEgressFailed, What: "egress proxy",
	}
}

// EgressContainerConfig returns the hardened create configuration of the
// egress proxy, on its egress network (the other networks are joined
// before it starts).
func EgressContainerConfig(spec EgressSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	return SidecarContainerConfig(spec.sidecar())
}

// CreateRoutedNetwork creates a labelled bridge with a route out and IPv6
// off: the attempt's egress network (the proxy is its only member, and
// inter-container traffic is off: shared is false), or the attempt network
// of an open_public attempt (shared: the worker and its services talk). An
// existing network of that name is adopted only when its labels are
// exactly these. Failures carry failure.SandboxCreateFailed.
func (c *Client) CreateRoutedNetwork(ctx context.Context, name string, labels map[string]string, shared bool) (string, error) {
	return c.createNetwork(ctx, c.sidecars, name, network.CreateOptions{
		Driver:     "bridge",
		EnableIPv6: new(false),
		Options:    map[string]string{"com.docker.network.bridge.enable_icc": strconv.FormatBool(shared)},
		Labels:     maps.Clone(labels),
	})
}

// FollowLogLines follows a container's stdout from its start until the
// container stops or ctx ends, handing each line of at most maxLine bytes
// to onLine; longer lines are skipped and counted. Its stderr is read and
// discarded. It returns the number of lines skipped.
func (c *Client) FollowLogLines(ctx context.Context, id string, maxLine int, onLine func([]byte)) (int, error) {
	rc, err := c.sidecars.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return 0, fmt.Errorf("container logs %s: %w", shortID(id), err)
	}
	defer rc.Close()
	s := &lineSplitter{maxLine: maxLine, onLine: onLine}
	_, err = stdcopy.StdCopy(s, io.Discard, rc)
	s.flush()
	if err != nil && ctx.Err() == nil {
		return s.skipped, fmt.Errorf("container logs %s: %w", shortID(id), err)
	}
	return s.skipped, nil
}

// lineSplitter splits a stream into lines of at most maxLine bytes,
// skipping (and counting) longer ones without holding them.
type lineSplitter struct {
	maxLine  int
	onLine   func([]byte)
	partial  []byte
	skipping bool
	skipped  int
}

func (s *lineSplitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !s.skipping && len(s.partial)+len(chunk) > s.maxLine {
			s.skipping, s.partial = true, s.partial[:0]
			s.skipped++
		}
		if !s.skipping {
			s.partial = append(s.partial, chunk...)
		}
		if i < 0 {
			break
		}
		if !s.skipping {
			s.onLine(bytes.Clone(s.partial))
		}
		s.partial, s.skipping = s.partial[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (s *lineSplitter) flush() {
	if !s.skipping && len(s.partial) > 0 {
		s.onLine(bytes.Clone(s.partial))
	}
	s.partial = nil
}

// StopContainer stops a container (SIGTERM, then SIGKILL after grace) and
// returns once it is stopped. A container already stopped or gone is
// success.
func (c *Client) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	seconds := int(grace / time.Second)
	return callErr(ctx, c, c.opts.Timeouts.Stop+grace, writeCall, func(ctx context.Context) error {
		err := c.runner.ContainerStop(ctx, id, container.StopOptions{Timeout: &seconds})
		if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsNotModified(err) {
			return nil
		}
		return fmt.Errorf("container stop %s: %w", shortID(id), err)
	})
}
