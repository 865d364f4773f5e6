package runner_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/messages"
)

// collectingDocker runs a collection at the worst moment: after the
// attempt found its image, before its container exists.
type collectingDocker struct {
	actors.Docker
	before func()
}

func (d collectingDocker) CreateWorker(ctx context.Context, spec dockerops.WorkerSpec) (string, error) {
	d.before()
	return d.Docker.CreateWorker(ctx, spec)
}

// Image collections run between the cache hit of an attempt on an expired,
// not-newest key and its container's creation, and again and again while
// it runs and ends: the attempt never loses its image, and
// the first collection after it ends removes the key. Without the
// reference count, the creation fails on the removed image. Every
// collection is scoped to the test's own project label.
func TestEndToEndCollectionNeverRemovesAnAttemptsImage(t *testing.T) {
	var beforeCreate func()
	e := newE2E(t, runner.Config{WrapDocker: func(d actors.Docker) actors.Docker {
		return collectingDocker{d, func() {
			if beforeCreate != nil {
				beforeCreate()
			}
		}}
	}})
	project := "gc-race-" + example.NewUUID()[:8]
	ctx := t.Context()
	repoFor := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		require.NoError(t, example.CreateRepo(ctx, dir, example.RepoOptions{
			Dockerfile: "FROM " + example.BaseImage + "\nLABEL gc=" + example.NewUUID() + "\n"}))
		return dir
	}
	run := func(repo string) messages.AttemptOutcome {
		e.repo = repo
		d := e.dispatch([]string{"/bin/sh", "-c", "sleep 2"}, 0)
		d.Repo.Name = project
		return e.wait(e.submit(d))
	}
	keysOf := func() map[string]bool {
		report, err := e.runner.CollectImages(ctx, imagegc.Request{Project: dockerops.LabelValue(project), DryRun: true})
		require.NoError(t, err)
		keys := map[string]bool{}
		for _, d := range report.Kept {
			keys[d.Key] = true
		}
		return keys
	}
	repoA, repoB := repoFor("a"), repoFor("b")
	require.Equal(t, messages.StatusSucceeded, run(repoA).Status)
	keysA := keysOf()
	require.Len(t, keysA, 1)
	require.Equal(t, messages.StatusSucceeded, run(repoB).Status) // newer: A is no longer the newest
	t.Cleanup(func() {
		_, err := e.runner.CollectImages(context.WithoutCancel(ctx), imagegc.Request{Project: dockerops.LabelValue(project),
			Policy: imagegc.Policy{KeepPerProject: 1, MaxAge: time.Minute}, Now: time.Now().Add(24 * time.Hour)})
		assert.NoError(t, err)
		for _, ref := range e.images(project) {
			_, _ = e.engine.ImageRemove(context.WithoutCancel(ctx), ref, image.RemoveOptions{PruneChildren: true})
		}
	})

	collect := imagegc.Request{Project: dockerops.LabelValue(project), Policy: imagegc.Policy{KeepPerProject: 1, MaxAge: time.Minute},
		Now: time.Now().Add(time.Hour)}
	// The collections begin once the attempt holds key A (its cache hit
	// comes before its container's creation): one at once, then again and
	// again until the attempt has ended. Begun earlier, a collection may
	// remove A before the attempt looks it up, and the attempt then
	// rightly builds A again, as the newest.
	var removedBeforeCreate int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	rounds := 0
	beforeCreate = func() {
		report, err := e.runner.CollectImages(ctx, collect)
		assert.NoError(t, err)
		removedBeforeCreate = len(report.Removed)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := e.runner.CollectImages(ctx, collect)
				assert.NoError(t, err)
				rounds++
			}
		}()
	}
	out := run(repoA)
	close(stop)
	wg.Wait()
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%+v", out)
	assert.Positive(t, rounds)
	assert.Zero(t, removedBeforeCreate, "nothing of the project was collectable while the attempt held key A")

	report, err := e.runner.CollectImages(ctx, collect)
	require.NoError(t, err)
	for _, d := range report.Kept {
		assert.NotContains(t, keysA, d.Key, "key A is unreferenced and expired now: %+v", report)
	}
}

// images lists the tags of the project's images.
func (e *e2e) images(project string) []string {
	report, err := e.runner.CollectImages(context.Background(), imagegc.Request{Project: dockerops.LabelValue(project), DryRun: true})
	require.NoError(e.t, err)
	var out []string
	for _, d := range append(report.Kept, report.Removed...) {
		out = append(out, d.Tags...)
	}
	return out
}

// The daemon's collector answers a dry-run request (a dry run only: on a
// shared engine, the test must not collect other runs' images); without
// it, the request fails.
func TestCollectImagesNowThroughTheCollector(t *testing.T) {
	e := newE2E(t, runner.Config{ImageGC: &runner.ImageGCConfig{}})
	report, err := e.runner.CollectImagesNow(true)
	require.NoError(t, err)
	assert.True(t, report.DryRun)
}
