package dockerops

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Service containers are sidecars (sidecar.go) on the attempt's network
// (see the services package for what each one runs). They are hardened
// like the worker: every capability dropped (no service forged runs needs
// one: each runs as its own unprivileged user on data directories it
// owns), no log driver, tmpfs data directories, and, for a service with
// credentials, a volume holding only its own password, read-only (never
// the attempt's secrets volume, which holds the provider credential). Each joins only the attempt's isolated network
// (CreateIsolatedNetwork), under its alias, with IPv6 off and DNS to its
// own loopback like the worker. CreateSidecar creates them.

// ServiceSpec describes one service container.
type ServiceSpec struct {
	Name, Image, Network, Alias string
	// User is "uid:gid", numeric and never 0.
	User   string
	Cmd    []string
	Env    []string
	Labels map[string]string
	// Tmpfs maps a directory to its tmpfs options.
	Tmpfs map[string]string
	// SecretsVolume holds only the service's own password ("" for a
	// service without one); mounted read-only at SecretsDir.
	SecretsVolume string
	MemoryBytes   int64
	NanoCPUs      int64
	PIDs          int64
	// CapAdd is what the image needs beyond nothing (documented per
	// service); empty for every service forged runs today.
	CapAdd       []string
	SecurityOpts []string
	// Guard, on an open_public network, is loaded into the service's
	// network namespace before CreateSidecar returns (netguard.go).
	Guard *NetGuard
	// Runtime is the engine's OCI runtime the service runs under ("":
	// the engine's default, runc).
	Runtime string
}

func (s ServiceSpec) validate() error {
	switch {
	case s.Name == "", s.Image == "", s.Network == "", s.Alias == "":
		return fmt.Errorf("service spec needs a name, an image, a network and an alias")
	case s.User == "" || s.User == "0" || strings.HasPrefix(s.User, "0:") || s.User == "root" || strings.HasPrefix(s.User, "root:"):
		return fmt.Errorf("service %s must not run as root", s.Alias)
	case s.MemoryBytes <= 0, s.NanoCPUs <= 0, s.PIDs <= 0:
		return fmt.Errorf("service %s memory, CPU and PID limits must be positive", s.Alias)
	}
	return nil
}

// Sidecar returns the service's container spec: only on the attempt's
// isolated network, under its alias, with DNS to its own loopback like the
// worker, and its own secrets volume (if any) read-only.
func (s ServiceSpec) Sidecar() (SidecarSpec, error) {
	if err := s.validate(); err != nil {
		return SidecarSpec{}, failure.Wrap(failure.SandboxCreateFailed, err, "service create")
	}
	return s.sidecar(), nil
}

func (s ServiceSpec) sidecar() SidecarSpec {
	return SidecarSpec{
		Name: s.Name, Image: s.Image, User: s.User, Cmd: s.Cmd, Env: s.Env, Labels: s.Labels, Tmpfs: s.Tmpfs,
		Network: s.Network, Aliases: []string{s.Alias}, SecretsVolume: s.SecretsVolume, DNS: []string{SandboxNameserver},
		MemoryBytes: s.MemoryBytes, NanoCPUs: s.NanoCPUs, PIDs: s.PIDs, CapAdd: s.CapAdd, SecurityOpts: s.SecurityOpts,
		Guard: s.Guard, Runtime: s.Runtime, Code: failure.SandboxCreateFailed, What: "service",
	}
}

// ServiceContainerConfig returns the hardened create configuration of a
// service container.
func ServiceContainerConfig(spec ServiceSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	return SidecarContainerConfig(spec.sidecar())
}

// WaitStopped blocks until the container is not running (or ctx ends) and
// returns its inspected state. A container that no longer exists is
// reported with Status "removed".
func (c *Client) WaitStopped(ctx context.Context, id string) (ContainerState, error) {
	resultC, errC := c.runner.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-resultC:
	case err := <-errC:
		if ctx.Err() != nil {
			return ContainerState{}, ctx.Err()
		}
		if !cerrdefs.IsNotFound(err) {
			return ContainerState{}, fmt.Errorf("container wait %s: %w", shortID(id), err)
		}
	}
	state, err := c.InspectState(context.WithoutCancel(ctx), id)
	if cerrdefs.IsNotFound(err) {
		return ContainerState{ExitCode: -1, Status: "removed"}, nil
	}
	return state, err
}

// ProbeSpec describes a readiness probe container: a short-lived, hardened
// container on the attempt network that runs cmd (a protocol probe) and
// exits 0 once the service answers.
type ProbeSpec struct {
	Name, Image, Network string
	Labels               map[string]string
	SecretsVolume        string
	Cmd                  []string
	SecurityOpts         []string
	// User is the attempt's sandbox user the probe runs as (zero:
	// messages.ImageUser).
	User messages.SandboxUser
	// Timeout is the probe's own cap (the probe program gives up then);
	// the host bounds the run at Timeout plus probeMargin.
	Timeout time.Duration
}

// Limits of a probe container.
const (
	probeMemoryBytes = 64 << 20
	probePIDs        = 32
	probeNanoCPUs    = 250_000_000
	// probeMargin is what the host adds to a probe's own cap before it
	// stops the probe container: the program's last try and its exit.
	probeMargin = 15 * time.Second
)

// ProbeContainerConfig returns the hardened create configuration of a probe
// container: a sidecar without an alias, attached, running cmd.
func ProbeContainerConfig(spec ProbeSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg, host, net := SidecarContainerConfig(SidecarSpec{
		Name: spec.Name, Image: spec.Image, Network: spec.Network, Entrypoint: spec.Cmd,
		User: spec.User.OrImage().String(), Labels: spec.Labels, DNS: []string{SandboxNameserver},
		SecretsVolume: spec.SecretsVolume, MemoryBytes: probeMemoryBytes, NanoCPUs: probeNanoCPUs, PIDs: probePIDs,
		SecurityOpts: spec.SecurityOpts,
	})
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr, cfg.OpenStdin, cfg.StdinOnce = true, true, true, true, true
	return cfg, host, net
}

// RunProbe runs a probe container to its end and removes it. It returns the
// probe's exit code and the tail of its stderr (its last error). The
// container is removed on a context that survives ctx.
func (c *Client) RunProbe(ctx context.Context, spec ProbeSpec) (int, string, error) {
	cfg, host, net := ProbeContainerConfig(spec)
	if err := c.asHelper(ctx, spec.Image, cfg, host); err != nil {
		return -1, "", err
	}
	id, err := c.createContainer(ctx, spec.Name, spec.Labels, cfg, host, net)
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = c.removeHelper(ctx, id) }()
	res, err := c.RunAttached(ctx, id, nil, nil, RunLimits{MaxDuration: spec.Timeout + probeMargin, MaxStdoutBytes: 64 << 10, MaxStderrBytes: 64 << 10, StderrTailBytes: 1024, StopGrace: time.Second})
	return res.ExitCode, res.Stderr, err
}

// removeHelper force-removes a short-lived helper container (a probe, a
// loader) on a context that survives ctx; one already gone is success. The
// teardown removes it by its labels if this fails.
func (c *Client) removeHelper(ctx context.Context, id string) error {
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeouts.Remove)
	defer cancel()
	if err := c.cleaner.ContainerRemove(rmCtx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// WriteSecrets writes files (name → content) into the secrets volume,
// root-owned with mode 0444, through a helper container that is created
// (never started) from image with the volume mounted, then removed. The
// content travels only in the archive sent to the engine.
func (c *Client) WriteSecrets(ctx context.Context, name, image, volume string, labels map[string]string, files map[string][]byte) error {
	cfg := &container.Config{Image: image, User: "0:0", Labels: maps.Clone(labels), Entrypoint: []string{"/nonexistent"}}
	host := loaderHostConfig(volume, SecretsDir)
	if err := c.asHelper(ctx, image, cfg, host); err != nil {
		return err
	}
	id, err := c.createContainer(ctx, name, labels, cfg, host, &network.NetworkingConfig{})
	if err != nil {
		return err
	}
	defer func() { _ = c.removeHelper(ctx, id) }()
	for _, file := range slices.Sorted(maps.Keys(files)) {
		content := files[file]
		if err := c.CopyFileInto(ctx, id, SecretsDir, file, bytes.NewReader(content), int64(len(content)), 0, 0, 0o444); err != nil {
			return failure.Wrap(failure.SandboxCreateFailed, err, "write secret %s", file)
		}
	}
	return nil
}
