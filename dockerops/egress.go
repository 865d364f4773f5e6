package dockerops

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/failure"
)

// The egress proxy (networkPolicy.mode public_allowlist; see the egress
// package for its policy) is the only container on both the attempt's
// isolated network and the attempt's egress network, a plain bridge with a
// route out (no other member, inter-container traffic off, IPv6 off). It
// runs squid hardened like a service container: read-only root
// filesystem, every capability dropped, no-new-privileges plus the
// operator's options, Debian's proxy user (uid 13), docker-init, memory
// with swap disabled, CPU and PIDs limits, IPv6 off, and tmpfs for what
// squid writes. Its entrypoint writes the configuration and the hosts file
// from its environment into its tmpfs and execs squid. Unlike the other
// containers it keeps a log (json-file, bounded at 1 MiB): squid writes its
// access log to stdout, which forged follows (FollowLogLines). It resolves
// names through the engine's embedded resolver, which forwards to the
// host's resolvers from the egress network.

// egressAPI is what the egress proxy needs beyond creating and starting a
// container.
type egressAPI interface {
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
}

func (s EgressSpec) validate() error {
	switch {
	case s.Name == "", s.Image == "", s.EgressNetwork == "", s.AttemptNetwork == "", s.Alias == "", s.RunDir == "", s.Config == "":
		return fmt.Errorf("egress spec needs a name, an image, both networks, an alias, a run directory and a configuration")
	case s.UID <= 0:
		return fmt.Errorf("the egress proxy must not run as root")
	case s.MemoryBytes <= 0:
		return fmt.Errorf("the egress proxy needs a memory limit")
	}
	return nil
}

// EgressContainerConfig returns the hardened create configuration of the
// egress proxy, on its egress network (the other networks are joined
// before it starts).
func EgressContainerConfig(spec EgressSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	initProcess := true
	stopTimeout := workerStopTimeoutSeconds
	pids := int64(egressPIDs)
	user := fmt.Sprintf("%d:%d", spec.UID, spec.UID)
	cfg := &container.Config{
		Image: spec.Image,
		User:  user,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
			"FORGE_EGRESS_DIR=" + spec.RunDir, "FORGE_EGRESS_CONF=" + spec.Config, "FORGE_EGRESS_HOSTS=" + spec.Hosts,
		},
		Labels:      maps.Clone(spec.Labels),
		Entrypoint:  []string{"/bin/sh", "-c", egressStartScript},
		Cmd:         []string{},
		StopTimeout: &stopTimeout,
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.EgressNetwork),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    append([]string{"no-new-privileges"}, spec.SecurityOpts...),
		Init:           &initProcess,
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": egressLogMaxSize, "max-file": "1"}},
		Tmpfs: map[string]string{
			spec.RunDir:        egressRunTmpfs,
			"/tmp":             egressSquidTmpfs,
			"/var/spool/squid": egressSquidTmpfs,
			"/var/log/squid":   egressRunTmpfs,
			"/run/squid":       egressRunTmpfs,
		},
		Sysctls: maps.Clone(isolatedSysctls),
		Resources: container.Resources{
			Memory:     spec.MemoryBytes,
			MemorySwap: spec.MemoryBytes,
			NanoCPUs:   egressNanoCPUs,
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: workerNoFile, Hard: workerNoFile},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	net := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{spec.EgressNetwork: {}}}
	return cfg, host, net
}

// CreateRoutedNetwork creates a labelled bridge with a route out and IPv6
// off: the attempt's egress network (the proxy is its only member, and
// inter-container traffic is off: shared is false), or the attempt network
// of an open_public attempt (shared: the worker and its services talk). An existing network of that name is adopted
// only when its labels are exactly these. Failures carry
// failure.SandboxCreateFailed.
func (c *Client) CreateRoutedNetwork(ctx context.Context, name string, labels map[string]string, shared bool) (string, error) {
	attempt := 0
	id, err := call(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) (string, error) {
		attempt++
		resp, err := c.egress.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:     "bridge",
			EnableIPv6: new(false),
			Options:    map[string]string{"com.docker.network.bridge.enable_icc": strconv.FormatBool(shared)},
			Labels:     maps.Clone(labels),
		})
		if err == nil {
			return resp.ID, nil
		}
		if attempt > 1 && cerrdefs.IsConflict(err) {
			if existing, ierr := c.egress.NetworkInspect(ctx, name, network.InspectOptions{}); ierr == nil && maps.Equal(existing.Labels, labels) {
				return existing.ID, nil
			}
		}
		return "", err
	})
	if err != nil {
		return "", opError(ctx, failure.SandboxCreateFailed, err, "network create %s", name)
	}
	return id, nil
}

// CreateEgressProxy creates the egress proxy on its egress network, joins
// it to the attempt network (under its alias) and the upstream networks,
// starts it and returns its id (also with an error, once created).
// Failures carry failure.SandboxEgressFailed.
func (c *Client) CreateEgressProxy(ctx context.Context, spec EgressSpec) (string, error) {
	if err := spec.validate(); err != nil {
		return "", failure.Wrap(failure.SandboxEgressFailed, err, "egress proxy create")
	}
	cfg, host, net := EgressContainerConfig(spec)
	id, err := c.createContainer(ctx, spec.Name, spec.Labels, cfg, host, net)
	if err != nil {
		return "", failure.Wrap(failure.SandboxEgressFailed, err, "egress proxy create")
	}
	joins := []struct {
		network string
		aliases []string
	}{{spec.AttemptNetwork, []string{spec.Alias}}}
	for _, u := range spec.Upstreams {
		joins = append(joins, struct {
			network string
			aliases []string
		}{u, nil})
	}
	for _, j := range joins {
		err := callErr(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) error {
			err := c.egress.NetworkConnect(ctx, j.network, id, &network.EndpointSettings{Aliases: slices.Clone(j.aliases)})
			if err != nil && cerrdefs.IsConflict(err) {
				return nil // an earlier try joined it
			}
			return err
		})
		if err != nil {
			return id, opError(ctx, failure.SandboxEgressFailed, err, "egress proxy join %s", j.network)
		}
	}
	err = callErr(ctx, c, c.opts.Timeouts.Start, writeCall, func(ctx context.Context) error {
		err := c.runner.ContainerStart(ctx, id, container.StartOptions{})
		if cerrdefs.IsNotModified(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return id, opError(ctx, failure.SandboxEgressFailed, err, "egress proxy start %s", spec.Name)
	}
	return id, nil
}

// FollowLogLines follows a container's stdout from its start until the
// container stops or ctx ends, handing each line of at most maxLine bytes
// to onLine; longer lines are skipped and counted. Its stderr is read and
// discarded. It returns the number of lines skipped.
func (c *Client) FollowLogLines(ctx context.Context, id string, maxLine int, onLine func([]byte)) (int, error) {
	rc, err := c.egress.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
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
