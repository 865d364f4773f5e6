package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	"github.com/forgedev/forged/internal/images/imagegc"
)

// B8 variants: an attempt on a warm daemon; the first attempt after the
// daemon binary was replaced by another build (UpgradedForged, the same
// worker); the first after the worker binary was replaced (a worker of
// another digest: its sandbox image is rebuilt, which is what every
// daemon upgrade cost while the image key held the daemon's digest).
const (
	b8Warm          = "warm daemon"
	b8DaemonUpgrade = "after a daemon upgrade"
	b8WorkerUpgrade = "after a worker upgrade"
)

// UpgradeResult is B8: each variant's attempt times, and how many of the
// attempts after a daemon upgrade hit the image cache (they all should)
// and how many after a worker upgrade rebuilt the image (they all must).
type UpgradeResult struct {
	Attempts          map[string]Summary `json:"attempts"`
	DaemonUpgradeHits int                `json:"daemonUpgradeCacheHits"`
	WorkerUpgradeHits int                `json:"workerUpgradeCacheHits"`
	Rounds            int                `json:"rounds"`
}

// measureUpgrade is B8. Each round, on one state root: a daemon of the
// measured build runs one attempt (untimed in the first round: it builds
// the image) and one timed warm attempt, and stops; a daemon of the
// upgraded build starts on the same state root and runs one timed
// attempt; it stops, and a daemon of the measured build with a worker of
// its own digest (the bench's worker with a round-unique trailer, which
// an ELF loader ignores: a stand-in for a new worker release) runs one
// timed attempt. The images that worker's attempt built are removed
// after it, so each round's worker upgrade builds again. Times are from
// the POST to the outcome; the daemons' own starts are not timed.
func (e *Env) measureUpgrade(ctx context.Context) (UpgradeResult, error) {
	res := UpgradeResult{Rounds: e.cfg.Runs}
	stateRoot := e.stateRoot("b8")
	worker := filepath.Join(filepath.Dir(e.cfg.ForgedBinary), "forged-worker")
	samples := map[string][]time.Duration{}
	attempt := func(binary string, extra []string, want string) (bool, error) {
		d, err := e.startDaemonWith(ctx, stateRoot, binary, 1, 1, extra...)
		if err != nil {
			return false, err
		}
		defer func() { _ = d.stop() }()
		dispatch, err := e.newDispatch(stateRoot, nil, 0)
		if err != nil {
			return false, err
		}
		took, steps, err := d.runAttempt(ctx, dispatch)
		if err != nil {
			return false, fmt.Errorf("%s: %w", want, err)
		}
		if want != "" {
			samples[want] = append(samples[want], took)
		}
		return slices.ContainsFunc(steps, func(s TimelineStep) bool { return s.Event == "sandbox_image_cache_hit" }), nil
	}
	if _, err := attempt(e.cfg.ForgedBinary, nil, ""); err != nil { // builds the image
		return res, err
	}
	for round := range e.cfg.Runs {
		if _, err := attempt(e.cfg.ForgedBinary, nil, b8Warm); err != nil {
			return res, err
		}
		hit, err := attempt(e.cfg.UpgradedForged, []string{"--worker-binary", worker}, b8DaemonUpgrade)
		if err != nil {
			return res, err
		}
		if hit {
			res.DaemonUpgradeHits++
		}
		newWorker, err := workerOfAnotherDigest(worker, filepath.Join(e.cfg.WorkDir, fmt.Sprintf("b8-worker-%d", round)))
		if err != nil {
			return res, err
		}
		before, err := e.agentImages(ctx)
		if err != nil {
			return res, err
		}
		hit, err = attempt(e.cfg.ForgedBinary, []string{"--worker-binary", newWorker}, b8WorkerUpgrade)
		if err != nil {
			return res, err
		}
		if hit {
			res.WorkerUpgradeHits++
		}
		if err := e.removeImagesSince(ctx, before); err != nil {
			return res, err
		}
	}
	res.Attempts = map[string]Summary{}
	for name, s := range samples {
		res.Attempts[name] = Durations(s)
	}
	return res, nil
}

// workerOfAnotherDigest copies the worker to dir with 16 random bytes
// appended: the same program (the loader maps only what the ELF headers
// name), another sha256, so forged keys another sandbox image for it.
func workerOfAnotherDigest(worker, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "forged-worker")
	src, err := os.Open(worker)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	trailer := make([]byte, 16)
	_, _ = rand.Read(trailer)
	_, err = io.Copy(dst, src)
	if err == nil {
		_, err = io.WriteString(dst, "forged-bench-b8:"+hex.EncodeToString(trailer))
	}
	return out, errors.Join(err, dst.Close())
}

// agentImages lists the managed images (agent and project) forged built
// for this run's project now: id → creation time.
func (e *Env) agentImages(ctx context.Context) (map[string]int64, error) {
	list, err := e.engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", imagegc.LabelManaged+"=true"), filters.Arg("label", imagegc.LabelProject+"="+e.project))})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make(map[string]int64, len(list))
	for _, im := range list {
		out[im.ID] = im.Created
	}
	return out, nil
}

// removeImagesSince removes the managed images that were not in before.
// The engine refuses to remove a parent before its children (an agent
// image is a child of its project image) and creation times are in
// seconds, so it goes newest first and in passes: whatever a pass could
// not remove is tried again while the passes make progress.
func (e *Env) removeImagesSince(ctx context.Context, before map[string]int64) error {
	now, err := e.agentImages(ctx)
	if err != nil {
		return err
	}
	var fresh []string
	for id := range now {
		if _, ok := before[id]; !ok {
			fresh = append(fresh, id)
		}
	}
	slices.SortFunc(fresh, func(a, b string) int { return cmp.Compare(now[b], now[a]) })
	for len(fresh) > 0 {
		var left []string
		var errs []error
		for _, id := range fresh {
			if _, err := e.engine.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
				left = append(left, id)
				errs = append(errs, fmt.Errorf("remove image %s: %w", id, err))
			}
		}
		if len(left) == len(fresh) {
			return errors.Join(errs...)
		}
		fresh = left
	}
	return nil
}
