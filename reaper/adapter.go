package reaper

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/messages"
)

// EngineAPI is the part of the Engine API client the adapter lists and
// removes objects with; *client.Client (github.com/docker/docker/client)
// implements it.
type EngineAPI interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, network string) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// Teardowner tears an attempt down by its exact ownership;
// *dockerops.Client implements it.
type Teardowner interface {
	Teardown(ctx context.Context, owner dockerops.Ownership, source string) (messages.CleanupReport, error)
}

// Timeouts bounds each engine call of the adapter. Zero fields take the
// defaults.
type Timeouts struct {
	List      time.Duration // one list call; default 30s
	StopGrace time.Duration // a container's time between SIGTERM and SIGKILL; default 10s
	Stop      time.Duration // added to StopGrace for the stop call; default 15s
	Remove    time.Duration // one remove call; default 30s
}

// withDefaults fills zero fields.
func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.List, 30*time.Second)
	def(&t.StopGrace, 10*time.Second)
	def(&t.Stop, 15*time.Second)
	def(&t.Remove, 30*time.Second)
	return t
}

// DockerAdapter is the production Docker of a round: teardown through
// dockerops, listing and removal through the Engine API.
type DockerAdapter struct {
	ops      Teardowner
	engine   EngineAPI
	timeouts Timeouts
}

// NewDockerAdapter returns the adapter over a dockerops client (for
// Teardown) and an Engine API client (for listing and removal), with the
// given per-call timeouts.
func NewDockerAdapter(ops Teardowner, engine EngineAPI, timeouts Timeouts) *DockerAdapter {
	return &DockerAdapter{ops: ops, engine: engine, timeouts: timeouts.withDefaults()}
}

// Teardown delegates to dockerops.
func (a *DockerAdapter) Teardown(ctx context.Context, owner dockerops.Ownership, source string) (messages.CleanupReport, error) {
	return a.ops.Teardown(ctx, owner, source)
}

// ListManaged lists every managed container (running or not), network and
// volume, each kind with its own deadline.
func (a *DockerAdapter) ListManaged(ctx context.Context) ([]Object, error) {
	managed := filters.NewArgs(filters.Arg("label", dockerops.LabelManaged+"=true"))
	var out []Object
	err := a.bounded(ctx, a.timeouts.List, func(ctx context.Context) error {
		list, err := a.engine.ContainerList(ctx, container.ListOptions{All: true, Filters: managed})
		for _, c := range list {
			name := ""
			if len(c.Names) > 0 {
				name = strings.TrimPrefix(c.Names[0], "/")
			}
			out = append(out, Object{Kind: KindContainer, ID: c.ID, Name: name, Labels: c.Labels, Created: unixTime(c.Created)})
		}
		return wrap(err, "list containers")
	})
	if err != nil {
		return nil, err
	}
	err = a.bounded(ctx, a.timeouts.List, func(ctx context.Context) error {
		list, err := a.engine.NetworkList(ctx, network.ListOptions{Filters: managed})
		for _, n := range list {
			out = append(out, Object{Kind: KindNetwork, ID: n.ID, Name: n.Name, Labels: n.Labels, Created: n.Created})
		}
		return wrap(err, "list networks")
	})
	if err != nil {
		return nil, err
	}
	err = a.bounded(ctx, a.timeouts.List, func(ctx context.Context) error {
		list, err := a.engine.VolumeList(ctx, volume.ListOptions{Filters: managed})
		for _, v := range list.Volumes {
			if v != nil {
				out = append(out, Object{Kind: KindVolume, ID: v.Name, Name: v.Name, Labels: v.Labels, Created: parseTime(v.CreatedAt)})
			}
		}
		return wrap(err, "list volumes")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove removes one object; "not found" is success. A container is
// stopped (with the stop grace) and then force-removed, keeping its
// volumes for their own removal.
func (a *DockerAdapter) Remove(ctx context.Context, obj Object) error {
	switch obj.Kind {
	case KindContainer:
		seconds := int(math.Ceil(a.timeouts.StopGrace.Seconds()))
		_ = a.bounded(ctx, a.timeouts.StopGrace+a.timeouts.Stop, func(ctx context.Context) error {
			return a.engine.ContainerStop(ctx, obj.ID, container.StopOptions{Timeout: &seconds})
		}) // a failed stop still lets the forced removal kill it
		return a.bounded(ctx, a.timeouts.Remove, func(ctx context.Context) error {
			return ignoreNotFound(a.engine.ContainerRemove(ctx, obj.ID, container.RemoveOptions{Force: true}), "remove container", obj.ID)
		})
	case KindNetwork:
		return a.bounded(ctx, a.timeouts.Remove, func(ctx context.Context) error {
			return ignoreNotFound(a.engine.NetworkRemove(ctx, obj.ID), "remove network", obj.ID)
		})
	case KindVolume:
		return a.bounded(ctx, a.timeouts.Remove, func(ctx context.Context) error {
			return ignoreNotFound(a.engine.VolumeRemove(ctx, obj.ID, false), "remove volume", obj.ID)
		})
	}
	return fmt.Errorf("unknown object kind %q", clip(obj.Kind, 32))
}

// bounded runs one engine call under its own deadline.
func (a *DockerAdapter) bounded(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx)
}

// ignoreNotFound treats a missing object as removed.
func ignoreNotFound(err error, what, id string) error {
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", what, clip(id, 64), err)
}

// wrap names the failed call.
func wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// unixTime converts an engine's seconds timestamp; zero stays zero.
func unixTime(seconds int64) time.Time {
	if seconds <= 0 {
		return time.Time{}
	}
	return time.Unix(seconds, 0).UTC()
}

// parseTime parses an engine's RFC 3339 timestamp; anything else is zero
// (an unknown creation time, which the reaper never removes by label).
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
