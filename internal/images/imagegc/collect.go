package imagegc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// EngineAPI is the part of the Engine API a collection needs.
type EngineAPI interface {
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, image string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
}

// callTimeout bounds each engine call.
const callTimeout = time.Minute

// List returns forged's tagged images (with the number of containers,
// running or not, using each) and its dangling ones; project, when not
// empty, narrows the list to the images of that project (its label value).
// The engine's own container count needs API 1.42: the containers are
// counted here.
func List(ctx context.Context, api EngineAPI, project string) (tagged, dangling []Image, err error) {
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	containers, err := api.ContainerList(callCtx, container.ListOptions{All: true})
	if err != nil {
		return nil, nil, fmt.Errorf("container list: %w", err)
	}
	users := map[string]int64{}
	for _, c := range containers {
		users[c.ImageID]++
	}
	args := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if project != "" {
		args.Add("label", LabelProject+"="+project)
	}
	summaries, err := api.ImageList(callCtx, image.ListOptions{ContainerCount: true, Filters: args})
	if err != nil {
		return nil, nil, fmt.Errorf("image list: %w", err)
	}
	for _, s := range summaries {
		img := Image{
			ID: s.ID, Project: s.Labels[LabelProject], Key: s.Labels[LabelKey], Kind: s.Labels[LabelKind],
			Created: time.Unix(s.Created, 0).UTC(), Bytes: s.Size, Containers: users[s.ID],
		}
		for _, t := range s.RepoTags {
			if t != "<none>:<none>" {
				img.Tags = append(img.Tags, t)
			}
		}
		if len(img.Tags) == 0 {
			dangling = append(dangling, img)
		} else {
			tagged = append(tagged, img)
		}
	}
	return tagged, dangling, nil
}

// Failure is an image that could not be removed.
type Failure struct {
	Decision
	Error string `json:"error"`
}

// Report is one collection.
type Report struct {
	DryRun     bool       `json:"dryRun"`
	Kept       []Decision `json:"kept"`
	Removed    []Decision `json:"removed"` // with DryRun: what would be removed
	Dangling   []Image    `json:"dangling"`
	Failed     []Failure  `json:"failed"`
	FreedBytes int64      `json:"freedBytes"` // upper bound: shared layers are counted per image
	// Audit is the collection of stored build logs (Request.StateRoot).
	Audit *AuditReport `json:"audit,omitempty"`
}

// Request is one collection.
type Request struct {
	InUse   map[string]bool // cache keys of live and queued attempts
	Policy  Policy
	Now     time.Time
	DryRun  bool
	Project string // only this project's images (its label value); empty: all
	// Refs, when set, adds the referenced keys to InUse and guards each
	// removal against an attempt acquiring the key meanwhile.
	Refs *Refs
	// StateRoot, when set and no Project narrows the collection, also
	// collects the audit artifacts kept there (PurgeAudit).
	StateRoot string
}

// Collect lists, plans and (unless DryRun) removes. An image that cannot
// be removed (a container started using it meanwhile, say) is reported in
// Failed and the collection goes on; the error is for the listing only.
func Collect(ctx context.Context, api EngineAPI, req Request) (Report, error) {
	inUse, dryRun := map[string]bool{}, req.DryRun
	for k := range req.InUse {
		inUse[k] = true
	}
	if req.Refs != nil {
		for k := range req.Refs.InUse() {
			inUse[k] = true
		}
	}
	tagged, dangling, err := List(ctx, api, req.Project)
	if err != nil {
		return Report{DryRun: dryRun}, err
	}
	plan := Select(tagged, inUse, req.Policy, req.Now)
	report := Report{DryRun: dryRun, Kept: append([]Decision{}, plan.Keep...), Removed: []Decision{}, Dangling: []Image{}, Failed: []Failure{}}
	for _, group := range byKey(plan.Remove) {
		if dryRun {
			report.Removed = append(report.Removed, group...)
			for _, d := range group {
				report.FreedBytes += d.Bytes
			}
			continue
		}
		removeGroup := func() error {
			for _, d := range group {
				if err := remove(ctx, api, d.Image); err != nil {
					report.Failed = append(report.Failed, Failure{d, err.Error()})
					continue
				}
				report.Removed = append(report.Removed, d)
				report.FreedBytes += d.Bytes
			}
			return nil
		}
		if req.Refs == nil {
			_ = removeGroup()
			continue
		}
		if ran, _ := req.Refs.IfUnused(group[0].Key, removeGroup); !ran {
			for _, d := range group {
				report.Kept = append(report.Kept, Decision{d.Image, ReasonInUse})
			}
		}
	}
	for _, img := range dangling {
		if img.Containers > 0 || inUse[img.Key] {
			continue
		}
		if !dryRun {
			if err := remove(ctx, api, img); err != nil {
				report.Failed = append(report.Failed, Failure{Decision{img, "dangling"}, err.Error()})
				continue
			}
		}
		report.Dangling = append(report.Dangling, img)
		report.FreedBytes += img.Bytes
	}
	if req.StateRoot != "" && req.Project == "" {
		audit, err := PurgeAudit(req.StateRoot, req)
		report.Audit = &audit
		if err != nil {
			return report, fmt.Errorf("audit artifacts: %w", err)
		}
	}
	return report, nil
}

// byKey splits decisions into runs of one key, in order (agents first
// within a key, as Select orders them).
func byKey(ds []Decision) [][]Decision {
	groups := map[string][]Decision{}
	var order []string
	for _, d := range ds {
		if _, ok := groups[d.Key]; !ok {
			order = append(order, d.Key)
		}
		groups[d.Key] = append(groups[d.Key], d)
	}
	out := make([][]Decision, 0, len(order))
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}

// remove untags every tag of img (removing the image with the last one)
// or, for a dangling image, removes it by id. Never forced: an image a
// container uses stays. A missing image is success.
func remove(ctx context.Context, api EngineAPI, img Image) error {
	refs := img.Tags
	if len(refs) == 0 {
		refs = []string{img.ID}
	}
	var errs []error
	for _, ref := range refs {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := api.ImageRemove(callCtx, ref, image.RemoveOptions{PruneChildren: true})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("image remove %s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveProject removes every image of project (its label value), tagged
// or dangling, that no container uses: for an operator retiring a project,
// and for test suites that label their images with a project of their
// own. An empty project is refused.
func RemoveProject(ctx context.Context, api EngineAPI, project string) (Report, error) {
	if project == "" {
		return Report{}, errors.New("image removal: no project named")
	}
	tagged, dangling, err := List(ctx, api, project)
	if err != nil {
		return Report{}, err
	}
	plan := Select(tagged, nil, Policy{}, time.Now())
	all := append(plan.Keep, plan.Remove...)
	slices.SortFunc(all, func(a, b Decision) int { return cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)) })
	report := Report{Kept: []Decision{}, Removed: []Decision{}, Dangling: []Image{}, Failed: []Failure{}}
	for _, d := range all {
		d.Reason = "project removed"
		if d.Containers > 0 {
			report.Kept = append(report.Kept, Decision{d.Image, ReasonContainer})
			continue
		}
		if err := remove(ctx, api, d.Image); err != nil {
			report.Failed = append(report.Failed, Failure{d, err.Error()})
			continue
		}
		report.Removed = append(report.Removed, d)
		report.FreedBytes += d.Bytes
	}
	for _, img := range dangling {
		if img.Containers > 0 {
			continue
		}
		if err := remove(ctx, api, img); err != nil {
			report.Failed = append(report.Failed, Failure{Decision{img, "dangling"}, err.Error()})
			continue
		}
		report.Dangling = append(report.Dangling, img)
		report.FreedBytes += img.Bytes
	}
	return report, nil
}
