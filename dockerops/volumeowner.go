package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// OwnedVolume is one volume whose root OwnVolumes gives the sandbox user,
// with Dirs (plain names) made under its root for the same owner.
type OwnedVolume struct {
	Volume string
	Dirs   []string
}

// ownerMount is where the owner helper mounts the volumes it re-owns: a
// path no image is expected to have, /forge-own/<index>.
const ownerMount = "/forge-own"

// maxOwnedVolumes bounds the volumes one OwnVolumes call re-owns.
const maxOwnedVolumes = 64

// OwnVolumes gives each volume's root, and the directories it names under
// it, to user (mode 0755), before the worker is created: the attempt's
// writable storage is its own uid's, whatever made the volume (a plain
// volume's root is root's, a bounded one's mkfs's owner). It creates a
// helper container from image, never started (no process of the image
// runs, no network), with every volume mounted under /forge-own and a
// writable root filesystem (the engine refuses a copy outside a volume
// into a read-only one; the container's layer is removed with it), copies
// in an archive of directory entries owned by user (the engine applies
// their owner and mode to the existing mount roots), and removes the
// container. It carries labels, so a crash in between leaves it to the
// teardown and the reaper. Failures carry failure.SandboxCreateFailed.
func (c *Client) OwnVolumes(ctx context.Context, image, name string, labels map[string]string, volumes []OwnedVolume, user messages.SandboxUser) (err error) {
	if len(volumes) == 0 {
		return nil
	}
	if user.UID <= 0 || user.GID <= 0 {
		return failure.New(failure.SandboxCreateFailed, "own volumes: sandbox user %s is not unprivileged", user)
	}
	if len(volumes) > maxOwnedVolumes {
		return failure.New(failure.SandboxCreateFailed, "own volumes: %d volumes, more than %d", len(volumes), maxOwnedVolumes)
	}
	archive, err := ownerArchive(volumes, user)
	if err != nil {
		return failure.Wrap(failure.SandboxCreateFailed, err, "own volumes")
	}
	cfg := &container.Config{
		Image:           image,
		Entrypoint:      []string{"/nonexistent"}, // never started
		User:            user.String(),
		Labels:          maps.Clone(labels),
		NetworkDisabled: true,
	}
	host := &container.HostConfig{
		NetworkMode: "none",
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		LogConfig:   container.LogConfig{Type: "none"},
	}
	for i, v := range volumes {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: v.Volume,
			Target: ownerMount + "/" + strconv.Itoa(i), VolumeOptions: noCopy()})
	}
	if err := c.asHelper(ctx, image, cfg, host); err != nil {
		return err
	}
	id, err := c.createContainer(ctx, name, labels, cfg, host, &network.NetworkingConfig{})
	if err != nil {
		return err
	}
	defer func() {
		if rerr := c.removeHelper(ctx, id); rerr != nil {
			err = errors.Join(err, failure.Wrap(failure.SandboxCreateFailed, rerr, "remove volume owner %s", name))
		}
	}()
	err = callErr(ctx, c, c.opts.Timeouts.Copy, writeCall, func(ctx context.Context) error {
		return c.copier.CopyToContainer(ctx, id, ownerMount, bytes.NewReader(archive), container.CopyToContainerOptions{})
	})
	if err != nil {
		return opError(ctx, failure.SandboxCreateFailed, err, "own volumes through %s", name)
	}
	return nil
}

// ownerArchive is the tar of the directory entries OwnVolumes applies:
// "<index>/" for each volume's root, then "<index>/<dir>/" for its Dirs.
func ownerArchive(volumes []OwnedVolume, user messages.SandboxUser) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now().UTC().Truncate(time.Second)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, Uid: user.UID, Gid: user.GID, ModTime: now, Format: tar.FormatPAX})
	}
	for i, v := range volumes {
		if v.Volume == "" {
			return nil, errors.New("a volume without a name")
		}
		root := strconv.Itoa(i) + "/"
		if err := dir(root); err != nil {
			return nil, err
		}
		for _, d := range v.Dirs {
			if !validVolumeFileName(d) || strings.HasPrefix(d, ".") {
				return nil, fmt.Errorf("directory %q of volume %s is not one plain name", d, v.Volume)
			}
			if err := dir(root + d + "/"); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// noCopy is the mount option that keeps the engine from copying the
// image's content (and its owner) into an empty volume.
func noCopy() *mount.VolumeOptions { return &mount.VolumeOptions{NoCopy: true} }
