package caches

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/forgedev/forged/dockerops"
)

// VolumeAPI is the part of the Engine API the collection needs.
type VolumeAPI interface {
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// callTimeout bounds each engine call of a collection.
const callTimeout = time.Minute

// DefaultMaxAge is how old a cache volume grows before `forged gc`
// removes it.
const DefaultMaxAge = 14 * 24 * time.Hour

// Volume is one cache volume.
type Volume struct {
	Name    string    `json:"name"`
	Project string    `json:"project"`
	Cache   string    `json:"cache"`
	Mode    string    `json:"mode"`
	Created time.Time `json:"created"`
}

// GCRequest is one collection of cache volumes.
type GCRequest struct {
	MaxAge  time.Duration
	Now     time.Time
	DryRun  bool
	Project string // only this project's caches (its label value); empty: all
}

// VolumeFailure is a volume that could not be removed.
type VolumeFailure struct {
	Volume
	Error string `json:"error"`
}

// GCReport is what one collection did.
type GCReport struct {
	DryRun  bool            `json:"dryRun"`
	Removed []Volume        `json:"removed"` // with DryRun: what would be removed
	Kept    int             `json:"kept"`
	Failed  []VolumeFailure `json:"failed"`
}

// List returns the cache volumes (those carrying LabelCache), oldest
// first; project, when not empty, narrows them to that project's.
func List(ctx context.Context, api VolumeAPI, project string) ([]Volume, error) {
	args := filters.NewArgs(filters.Arg("label", LabelCache))
	if project != "" {
		args.Add("label", dockerops.LabelProject+"="+dockerops.LabelValue(project))
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := api.VolumeList(callCtx, volume.ListOptions{Filters: args})
	if err != nil {
		return nil, fmt.Errorf("volume list: %w", err)
	}
	out := make([]Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		if v == nil || v.Labels[LabelCache] == "" {
			continue
		}
		created, err := time.Parse(time.RFC3339, v.CreatedAt)
		if err != nil {
			// Without a creation time its age is unknown: kept.
			created = time.Time{}
		}
		out = append(out, Volume{Name: v.Name, Project: v.Labels[dockerops.LabelProject], Cache: v.Labels[LabelCache],
			Mode: v.Labels[LabelCacheMode], Created: created.UTC()})
	}
	slices.SortFunc(out, func(a, b Volume) int { return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name)) })
	return out, nil
}

// Collect removes the cache volumes older than MaxAge at Now (the volume's
// creation time: the engine keeps no last-use time). A volume a container
// uses is never removed (the engine refuses; it is reported in Failed),
// nor one whose creation time is unknown. With DryRun nothing is removed.
// The error is for the listing only.
func Collect(ctx context.Context, api VolumeAPI, req GCRequest) (GCReport, error) {
	report := GCReport{DryRun: req.DryRun, Removed: []Volume{}, Failed: []VolumeFailure{}}
	if req.MaxAge <= 0 {
		return report, fmt.Errorf("cache max age must be positive, got %s", req.MaxAge)
	}
	vols, err := List(ctx, api, req.Project)
	if err != nil {
		return report, err
	}
	for _, v := range vols {
		if v.Created.IsZero() || req.Now.Sub(v.Created) <= req.MaxAge {
			report.Kept++
			continue
		}
		if !req.DryRun {
			callCtx, cancel := context.WithTimeout(ctx, callTimeout)
			err := api.VolumeRemove(callCtx, v.Name, false)
			cancel()
			if err != nil && !cerrdefs.IsNotFound(err) {
				report.Failed = append(report.Failed, VolumeFailure{v, err.Error()})
				continue
			}
		}
		report.Removed = append(report.Removed, v)
	}
	return report, nil
}
