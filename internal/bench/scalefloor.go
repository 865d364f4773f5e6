package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/forgedev/forged/internal/host/quota"
)

// floorVolumes gives the native floor of B7 the filesystem a sandbox's
// workspace gets: a fresh ext4 image without a journal on a loop device,
// made by the same code as the workspace volume (quota.Store.Provision,
// same mkfs.ext4 options, same size) and mounted nodev,nosuid as the
// engine's local driver mounts it. Mounting needs root; without it (or
// without loop devices and e2fsprogs) the floor runs in the benchmark's
// work directory on the host's filesystem, and Where says so.
type floorVolumes struct {
	store  *quota.Store // nil: the work directory
	root   string       // the store's state root, under the work directory
	reason string       // why there is no store
}

// Floor filesystems, as ScaleResult.FloorFilesystem names them.
const (
	floorOnImage   = "ext4 image"
	floorOnWorkDir = "work directory"
)

func newFloorVolumes(workDir string) (*floorVolumes, error) {
	if os.Geteuid() != 0 {
		return &floorVolumes{reason: "not root: mounting an image needs root"}, nil
	}
	facts := quota.Detect(false)
	if !facts.Bounded() {
		return &floorVolumes{reason: facts.Reason}, nil
	}
	root, err := os.MkdirTemp(workDir, "volumes-floor-")
	if err != nil {
		return nil, err
	}
	return &floorVolumes{store: quota.NewStore(root, facts, os.Getuid(), os.Getgid()), root: root}, nil
}

// Where names the floor's filesystem for the report.
func (v *floorVolumes) Where() string {
	if v.store == nil {
		return floorOnWorkDir + " (" + v.reason + ")"
	}
	return floorOnImage
}

// Mount makes a fresh image of bytes, mounts it on a new directory under
// workDir and returns that directory and the function that unmounts it,
// detaches its loop device and removes the image and the directory. The
// release runs on every path: Mount undoes what it made when it fails.
// Without a store the directory is a plain one in workDir.
func (v *floorVolumes) Mount(ctx context.Context, workDir string, bytes int64) (dir string, release func() error, err error) {
	dir, err = os.MkdirTemp(workDir, "floor-mnt-")
	if err != nil {
		return "", nil, err
	}
	if v.store == nil {
		return dir, func() error { return os.RemoveAll(dir) }, nil
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	volume := "forge-" + hex.EncodeToString(id[:]) + "-floor"
	opts, err := v.store.Provision(ctx, volume, bytes)
	if err != nil {
		return "", nil, errors.Join(err, os.Remove(dir))
	}
	mounted := false
	release = func() error {
		var errs []error
		if mounted {
			if err := unmount(dir); err != nil {
				errs = append(errs, fmt.Errorf("unmount the floor's image: %w", err))
			} else {
				mounted = false
			}
		}
		// Release detaches the loop device (at the last unmount, if one
		// failed above) and removes the image.
		errs = append(errs, v.store.Release(context.WithoutCancel(ctx), volume))
		if !mounted {
			errs = append(errs, os.Remove(dir))
		}
		return errors.Join(errs...)
	}
	if err := mountExt4(opts["device"], dir, opts["o"]); err != nil {
		return "", nil, errors.Join(fmt.Errorf("mount the floor's image: %w", err), release())
	}
	mounted = true
	return dir, release, nil
}

// Close removes the store's directory (its images are released by each
// Mount's release).
func (v *floorVolumes) Close() error {
	if v.store == nil {
		return nil
	}
	return os.RemoveAll(v.root)
}
