package dockerops

import (
	"context"
	"fmt"
	"maps"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/forgedev/forged/failure"
)

// provisionAPI is the part of the engine API that provisions networks and
// volumes (and removes preflight's probe networks).
type provisionAPI interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, network string, options network.InspectOptions) (network.Inspect, error)
	NetworkRemove(ctx context.Context, network string) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
}

// VolumeLabels returns the labels of the named volume, and false when no
// such volume exists. Failures carry failure.SandboxCreateFailed.
func (c *Client) VolumeLabels(ctx context.Context, name string) (map[string]string, bool, error) {
	v, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (volume.Volume, error) {
		return c.provisioner.VolumeInspect(ctx, name)
	})
	if cerrdefs.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, opError(ctx, failure.SandboxCreateFailed, err, "volume inspect %s", name)
	}
	return v.Labels, true, nil
}

// CreateVolume creates a local volume with the given labels. An existing
// volume of that name is accepted only when its labels are exactly these.
// Failures carry failure.SandboxCreateFailed.
func (c *Client) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	return c.CreateVolumeWithOptions(ctx, name, labels, nil)
}

// CreateVolumeWithOptions is CreateVolume with the local driver's options:
// {type, device, o} mount a filesystem (such as a quota.Store image on a
// loop device) as the volume instead of a directory in Docker's root. An
// existing volume is accepted only when its labels and options are
// exactly these.
func (c *Client) CreateVolumeWithOptions(ctx context.Context, name string, labels, driverOpts map[string]string) error {
	v, err := call(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) (volume.Volume, error) {
		return c.provisioner.VolumeCreate(ctx, volume.CreateOptions{
			Name:       name,
			Driver:     "local",
			DriverOpts: maps.Clone(driverOpts),
			Labels:     maps.Clone(labels),
		})
	})
	if err == nil && len(driverOpts) > 0 && !maps.Equal(v.Options, driverOpts) {
		err = fmt.Errorf("volume %s already exists with other options: %w", name, cerrdefs.ErrConflict)
	}
	if err == nil && !maps.Equal(v.Labels, labels) {
		// The engine hands back an existing volume of the same name as if
		// it had created it; one that is not exactly ours must not be used.
		err = fmt.Errorf("volume %s already exists with other labels: %w", name, cerrdefs.ErrConflict)
	}
	if err != nil {
		return opError(ctx, failure.SandboxCreateFailed, err, "volume create %s", name)
	}
	return nil
}
