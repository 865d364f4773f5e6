package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/forgedev/forged/failure"
)

// VolumeFile is one file to put into a volume: a bare name and its
// content. The content may be a secret: it never appears in an error.
type VolumeFile struct {
	Name    string
	Content []byte
	// Writable makes the file mode 0600 instead of 0400 (a writable
	// credential mount, whose CLI rewrites its token file).
	Writable bool
}

// loaderMount is where a loader container mounts the volume it fills.
const loaderMount = "/load"

// LoadVolume puts files into volume, owned by uid:gid with mode 0400 (0600
// when Writable),
// through a loader container: created from image with the volume mounted
// read-write, never started (no process of the image runs, no network),
// the files copied in through the API, and the container removed. The
// loader carries labels, so a crash in between leaves it to the teardown
// and the reaper. The worker then mounts the volume read-only. Failures
// carry failure.SandboxCreateFailed and never quote a file's content.
func (c *Client) LoadVolume(ctx context.Context, image, name, volume string, labels map[string]string, files []VolumeFile, uid, gid int) (err error) {
	archive, err := volumeArchive(files, uid, gid)
	if err != nil {
		return failure.Wrap(failure.SandboxCreateFailed, err, "load volume %s", volume)
	}
	cfg := &container.Config{
		Image:           image,
		Entrypoint:      []string{"/nonexistent"}, // never started
		User:            fmt.Sprintf("%d:%d", uid, gid),
		Labels:          labels,
		NetworkDisabled: true,
	}
	host := loaderHostConfig(volume, loaderMount)
	if err := c.asHelper(ctx, image, cfg, host); err != nil {
		return err
	}
	id, err := call(ctx, c, c.opts.Timeouts.Create, onceCall, func(ctx context.Context) (string, error) {
		resp, err := c.creator.ContainerCreate(ctx, cfg, host, nil, nil, name)
		return resp.ID, err
	})
	if err != nil {
		return opError(ctx, failure.SandboxCreateFailed, err, "create volume loader %s", name)
	}
	defer func() {
		if rerr := c.removeHelper(ctx, id); rerr != nil {
			err = errors.Join(err, failure.Wrap(failure.SandboxCreateFailed, rerr, "remove volume loader %s", name))
		}
	}()
	err = callErr(ctx, c, c.opts.Timeouts.Copy, writeCall, func(ctx context.Context) error {
		return c.copier.CopyToContainer(ctx, id, loaderMount, bytes.NewReader(archive), container.CopyToContainerOptions{})
	})
	if err != nil {
		return opError(ctx, failure.SandboxCreateFailed, err, "copy into volume %s", volume)
	}
	return nil
}

// volumeArchive is the tar of files: flat, regular, 0400 (0600 when
// Writable).
func volumeArchive(files []VolumeFile, uid, gid int) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now().UTC().Truncate(time.Second)
	for _, f := range files {
		if !validVolumeFileName(f.Name) {
			return nil, fmt.Errorf("invalid file name %q", f.Name)
		}
		mode := int64(0o400)
		if f.Writable {
			mode = 0o600
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Size: int64(len(f.Content)), Mode: mode,
			Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// validVolumeFileName admits 1-128 characters of [A-Za-z0-9._-], not "."
// or "..".
func validVolumeFileName(name string) bool {
	if name == "" || len(name) > 128 || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ValidVolumeFileName reports whether name may be a VolumeFile's name.
func ValidVolumeFileName(name string) bool { return validVolumeFileName(name) }

// loaderHostConfig is the host configuration of a helper container that is
// created, never started, to copy files into volume (mounted at target).
func loaderHostConfig(volume, target string) *container.HostConfig {
	return &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Mounts:         []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: target}},
	}
}
