package dockerops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/failure"
)

// A sidecar is a container that runs beside the worker for one attempt: a
// service (services.go) or the egress proxy (egress.go). Both are created,
// hardened and started by one path, CreateSidecar, from a SidecarSpec that
// their own typed specs produce: read-only root filesystem, every
// capability dropped, no-new-privileges plus the operator's options, an
// unprivileged numeric user, docker-init, memory with swap disabled, CPU
// and PIDs limits, IPv6 off, tmpfs where it writes.

// Sidecar is a typed sidecar spec (ServiceSpec, EgressSpec).
type Sidecar interface {
	// Sidecar returns the container's spec, or why the typed spec is
	// refused (a *failure.Error with the sidecar's code).
	Sidecar() (SidecarSpec, error)
}

// NetworkJoin is a further network a sidecar joins before it starts.
type NetworkJoin struct {
	Network string
	Aliases []string
}

// SidecarSpec is one sidecar container, as CreateSidecar creates it.
type SidecarSpec struct {
	Name, Image string
	// User is "uid:gid", numeric and never 0 (the typed specs check it).
	User string
	// Entrypoint replaces the image's (empty: none); Cmd are its arguments.
	Entrypoint, Cmd, Env []string
	Labels               map[string]string
	// Tmpfs maps a directory to its tmpfs options.
	Tmpfs map[string]string
	// Network is the network the container is created on, under Aliases;
	// Joins are joined before it starts.
	Network string
	Aliases []string
	Joins   []NetworkJoin
	// SecretsVolume, when set, is mounted read-only at SecretsDir.
	SecretsVolume string
	// DNS are its nameservers (empty: the engine's resolver).
	DNS                         []string
	MemoryBytes, NanoCPUs, PIDs int64
	CapAdd, SecurityOpts        []string
	// Log is its log driver (a zero one is "none": no log kept).
	Log container.LogConfig
	// Runtime is the engine's OCI runtime it runs under ("": the
	// engine's default).
	Runtime string
	// Guard, when set, is loaded into its network namespace once it
	// started (GuardNetns), before CreateSidecar returns.
	Guard *NetGuard
	// Code is what its failures carry; What names it in their messages
	// ("service", "egress proxy").
	Code failure.Code
	What string
	// Helper says it runs forged's own program, not its image's (the
	// netns holder): it takes no HEALTHCHECK, STOPSIGNAL or ENV from the
	// image (notFromImage).
	Helper bool
}

// sidecarVolumeTmpfsOptions cover a VOLUME path its image declares in a
// sidecar (imagevolumes.go): a tmpfs of the scratch size of its memory
// limit (ScratchTmpfsBytes: half of it, which it is charged to), owned by
// its user, where the engine would have made an unbounded anonymous
// volume.
func sidecarVolumeTmpfsOptions(spec SidecarSpec) string {
	uid, gid, ok := strings.Cut(spec.User, ":")
	if !ok {
		gid = uid
	}
	return fmt.Sprintf("rw,nosuid,nodev,noexec,size=%dm,uid=%s,gid=%s,mode=0755", ScratchTmpfsBytes(spec.MemoryBytes)>>20, uid, gid)
}

// SidecarContainerConfig returns the hardened create configuration of a
// sidecar, on its first network.
func SidecarContainerConfig(spec SidecarSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	initProcess := true
	stopTimeout := workerStopTimeoutSeconds
	pids := spec.PIDs
	logConfig := spec.Log
	if logConfig.Type == "" {
		logConfig = container.LogConfig{Type: "none"}
	}
	cfg := &container.Config{
		Image:       spec.Image,
		User:        spec.User,
		Env:         slices.Clone(spec.Env),
		Labels:      maps.Clone(spec.Labels),
		Cmd:         slices.Clone(spec.Cmd),
		Entrypoint:  append([]string{}, spec.Entrypoint...),
		StopTimeout: &stopTimeout,
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.Network),
		Runtime:        spec.Runtime,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		CapAdd:         slices.Clone(spec.CapAdd),
		SecurityOpt:    append([]string{"no-new-privileges"}, spec.SecurityOpts...),
		Init:           &initProcess,
		LogConfig:      logConfig,
		Tmpfs:          maps.Clone(spec.Tmpfs),
		// IPv6 off inside the container (see network.go).
		Sysctls: maps.Clone(isolatedSysctls),
		DNS:     slices.Clone(spec.DNS),
		Resources: container.Resources{
			Memory:     spec.MemoryBytes,
			MemorySwap: spec.MemoryBytes,
			NanoCPUs:   spec.NanoCPUs,
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: workerNoFile, Hard: workerNoFile},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	if spec.SecretsVolume != "" {
		host.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: spec.SecretsVolume, Target: SecretsDir, ReadOnly: true}}
	}
	net := &network.NetworkingConfig{
		EndpointsConfig: map[string]*network.EndpointSettings{spec.Network: {Aliases: slices.Clone(spec.Aliases)}},
	}
	return cfg, host, net
}

// CreateSidecar creates a sidecar on its first network, joins it to the
// others, starts it and returns its id (also with an error, once it was
// created). Failures carry the sidecar's code.
func (c *Client) CreateSidecar(ctx context.Context, s Sidecar) (string, error) {
	spec, err := s.Sidecar()
	if err != nil {
		return "", err
	}
	cfg, host, net := SidecarContainerConfig(spec)
	volumes, env, err := c.imageFacts(ctx, spec.Image)
	if err != nil {
		return "", failure.Wrap(spec.Code, err, "%s create", spec.What)
	}
	coverVolumes(host, volumes, sidecarVolumeTmpfsOptions(spec))
	if spec.Helper {
		notFromImage(cfg, env, nil)
	}
	id, err := c.createContainer(ctx, spec.Name, spec.Labels, cfg, host, net)
	if err != nil {
		if failure.CodeOf(err) != spec.Code {
			err = failure.Wrap(spec.Code, err, "%s create", spec.What)
		}
		return "", err
	}
	for _, j := range spec.Joins {
		err := callErr(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) error {
			err := c.sidecars.NetworkConnect(ctx, j.Network, id, &network.EndpointSettings{Aliases: slices.Clone(j.Aliases)})
			if err != nil && cerrdefs.IsConflict(err) {
				return nil // an earlier try joined it
			}
			return err
		})
		if err != nil {
			return id, opError(ctx, spec.Code, err, "%s join %s", spec.What, j.Network)
		}
	}
	err = callErr(ctx, c, c.opts.Timeouts.Start, writeCall, func(ctx context.Context) error {
		err := c.runner.ContainerStart(ctx, id, container.StartOptions{})
		if cerrdefs.IsNotModified(err) {
			return nil // an earlier try started it
		}
		return err
	})
	if err != nil {
		return id, opError(ctx, spec.Code, err, "%s start %s", spec.What, spec.Name)
	}
	if spec.Guard != nil {
		if err := c.GuardNetns(ctx, id, *spec.Guard); err != nil {
			if failure.CodeOf(err) != spec.Code {
				err = failure.Wrap(spec.Code, err, "%s guard", spec.What)
			}
			return id, err
		}
	}
	return id, nil
}

// createOrAdopt runs create as a retried write call. A retried create that
// conflicts may follow an earlier try that succeeded unheard: the object
// of that name is then adopted when adopt finds it ours (its labels), and
// refused otherwise.
func createOrAdopt(ctx context.Context, c *Client, create func(context.Context) (string, error), adopt func(context.Context) (string, bool)) (string, error) {
	attempt := 0
	return call(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) (string, error) {
		attempt++
		id, err := create(ctx)
		if err == nil {
			return id, nil
		}
		if attempt > 1 && cerrdefs.IsConflict(err) {
			if id, ours := adopt(ctx); ours {
				return id, nil
			}
		}
		return "", err
	})
}

// createContainer creates a container, adopting one an earlier unheard
// attempt created only when it carries all the labels.
func (c *Client) createContainer(ctx context.Context, name string, labels map[string]string, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig) (string, error) {
	id, err := createOrAdopt(ctx, c, func(ctx context.Context) (string, error) {
		resp, err := c.creator.ContainerCreate(ctx, cfg, host, net, nil, name)
		return resp.ID, err
	}, func(ctx context.Context) (string, bool) {
		existing, err := c.creator.ContainerInspect(ctx, name)
		return existing.ID, err == nil && existing.Config != nil && hasLabels(existing.Config.Labels, labels)
	})
	if err != nil {
		return "", opError(ctx, failure.SandboxCreateFailed, err, "container create %s", name)
	}
	return id, nil
}

// createNetwork creates a network, adopting one an earlier unheard attempt
// created only when its labels are exactly these.
func (c *Client) createNetwork(ctx context.Context, api networkCreator, name string, options network.CreateOptions) (string, error) {
	id, err := createOrAdopt(ctx, c, func(ctx context.Context) (string, error) {
		resp, err := api.NetworkCreate(ctx, name, options)
		return resp.ID, err
	}, func(ctx context.Context) (string, bool) {
		existing, err := api.NetworkInspect(ctx, name, network.InspectOptions{})
		return existing.ID, err == nil && maps.Equal(existing.Labels, options.Labels)
	})
	if err != nil {
		return "", opError(ctx, failure.SandboxCreateFailed, err, "network create %s", name)
	}
	return id, nil
}

// networkCreator creates and inspects networks (provisionAPI, sidecarAPI).
type networkCreator interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, network string, options network.InspectOptions) (network.Inspect, error)
}
