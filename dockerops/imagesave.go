package dockerops

import (
	"context"
	"fmt"
	"io"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// imageSaveAPI exports images (docker save), for the image policy's SBOM.
type imageSaveAPI interface {
	ImageSave(ctx context.Context, images []string, opts ...client.ImageSaveOption) (io.ReadCloser, error)
}

var _ imageSaveAPI = (*client.Client)(nil)

// SaveImage writes the image ref as a docker-archive tar (what docker save
// writes) to dst, a new file of mode 0600. The export, transfer included,
// is bounded by Options.Timeouts.Copy; a partial file is removed.
func (c *Client) SaveImage(ctx context.Context, ref, dst string) error {
	api, ok := c.images.(imageSaveAPI)
	if !ok {
		return opError(ctx, "", fmt.Errorf("the engine client cannot export images"), "image save %s", ref)
	}
	err := callErr(ctx, c, c.opts.Timeouts.Copy, readCall, func(ctx context.Context) error {
		body, err := api.ImageSave(ctx, []string{ref})
		if err != nil {
			return err
		}
		defer body.Close()
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		_ = os.Remove(dst)
		return opError(ctx, "", err, "image save %s", ref)
	}
	return nil
}

// RemoveImage removes (untags) the image ref, pruning untagged parents.
// A missing image is success; an image in use is an error.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	err := callErr(ctx, c, c.opts.Timeouts.Remove, writeCall, func(ctx context.Context) error {
		_, err := c.images.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return opError(ctx, "", err, "image remove %s", ref)
	}
	return nil
}
