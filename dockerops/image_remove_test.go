package dockerops

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
)

// Only tests remove single images (the ones they built); forged's own
// removals go through package imagegc, so this lives with the tests.

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
