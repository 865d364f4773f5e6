package runner

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/forgedev/forged/internal/host/preflight"
)

// ToolchainLabel names a toolchain image: scripts/images.sh labels each
// image it builds org.forged.image.name=<toolchain> (go, node, python,
// rust, c).
const ToolchainLabel = "org.forged.image.name"

// toolchainListTimeout bounds the engine's image list for one report.
const toolchainListTimeout = 10 * time.Second

// ImageLister is the engine call ToolchainCheck needs.
type ImageLister interface {
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
}

// ToolchainCheck lists, for preflight, the toolchain images the engine
// holds: each image labelled ToolchainLabel, with its toolchain name, its
// first tag in order (none for an untagged one) and its id, sorted by
// name then tag. A failed list reports none: the report says what the
// engine was seen to hold, and a fleet member then advertises no
// toolchain rather than a stale one.
func ToolchainCheck(engine ImageLister) func(context.Context) []preflight.ToolchainImage {
	return func(ctx context.Context) []preflight.ToolchainImage {
		ctx, cancel := context.WithTimeout(ctx, toolchainListTimeout)
		defer cancel()
		list, err := engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", ToolchainLabel))})
		if err != nil {
			return nil
		}
		out := make([]preflight.ToolchainImage, 0, len(list))
		for _, im := range list {
			name := im.Labels[ToolchainLabel]
			if name == "" {
				continue
			}
			tags := slices.Clone(im.RepoTags)
			tags = slices.DeleteFunc(tags, func(t string) bool { return t == "<none>:<none>" })
			slices.Sort(tags)
			ref := ""
			if len(tags) > 0 {
				ref = tags[0]
			}
			out = append(out, preflight.ToolchainImage{Name: name, Ref: ref, ImageID: im.ID})
		}
		slices.SortFunc(out, func(a, b preflight.ToolchainImage) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return strings.Compare(a.Ref, b.Ref)
		})
		return out
	}
}
