package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
)

// orphanResourcesPerAttempt counts the resources of one orphaned attempt in B6: a created
// (never started) container and two volumes. Networks are left out: the
// engine's default address pools hold about thirty, shared with every
// other user of the host.
const orphanResourcesPerAttempt = 3

// measureReap is B6: ReapResources orphaned, fully labelled resources of a
// runner, removed once by forged's reaper (one round, in-process) and once
// by the seed's sequential CLI loop, ReapRuns times each.
func (e *Env) measureReap(ctx context.Context) (map[string]Summary, error) {
	c := e.cfg
	stateRoot := e.stateRoot("b6-reaper")
	r, err := runner.New(ctx, runner.Config{
		StateRoot: stateRoot, LockRoot: filepath.Join(stateRoot+"-tmp", "forged"), WorkerBinary: filepath.Join(filepath.Dir(c.ForgedBinary), "forged-worker"),
		AllowRootful: true, Capacity: example.SmallHostCapacity(), Slots: 1,
		ReapInterval: time.Hour, ReapGrace: time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var forged, cli []time.Duration
	for run := 0; run < c.ReapRuns; run++ {
		made, err := e.createOrphans(ctx, r.RunnerID(), c.ReapResources)
		if err != nil {
			return nil, err
		}
		// The engine dates volumes to the second; the reaper counts a
		// whole second as their creation time ("created before the round").
		time.Sleep(1100 * time.Millisecond)
		start := time.Now()
		round, err := r.Reap(false, nil)
		forged = append(forged, time.Since(start))
		if err != nil {
			return nil, fmt.Errorf("reaper: %w", err)
		}
		if got := len(round.Removed); got != made {
			reasons := map[string]int{}
			for _, skip := range round.Skipped {
				reasons[string(skip.Reason)]++
			}
			return nil, fmt.Errorf("reaper removed %d of %d orphans (skipped: %v)", got, made, reasons)
		}
		if made, err = e.createOrphans(ctx, e.runnerID, c.ReapResources); err != nil {
			return nil, err
		}
		start = time.Now()
		removed, err := seedCLIReap(ctx, e.runnerID)
		cli = append(cli, time.Since(start))
		if err != nil {
			return nil, fmt.Errorf("seed CLI loop: %w", err)
		}
		if removed != made {
			return nil, fmt.Errorf("seed CLI loop removed %d of %d orphans", removed, made)
		}
	}
	return map[string]Summary{"reaper": Durations(forged), "seed CLI": Durations(cli)}, nil
}

// createOrphans creates n labelled resources of runnerID (rounded up to
// whole attempts), eight engine calls at a time, and returns how many it
// made. They are untimed.
func (e *Env) createOrphans(ctx context.Context, runnerID string, n int) (int, error) {
	e.noteRunner(runnerID, "B6 orphans")
	attempts := (n + orphanResourcesPerAttempt - 1) / orphanResourcesPerAttempt
	sem := make(chan struct{}, 8)
	errs := make([]error, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		// A dead forged's attempt: another runner instance, its lease over.
		d, err := example.NewDispatch(example.DispatchOptions{Project: e.project, RunnerID: runnerID, RepoPath: e.repo, Lease: -time.Hour})
		if err != nil {
			return 0, err
		}
		labels, names, err := e.resourcesOf(d)
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := e.engine.ContainerCreate(ctx, &container.Config{Image: example.BaseImage, Cmd: []string{"true"}, Labels: labels},
				&container.HostConfig{NetworkMode: "none"}, nil, nil, names.Container)
			errs[i] = err
			for _, v := range []string{names.WorkspaceVolume, names.ControlVolume} {
				if _, err := e.engine.VolumeCreate(ctx, volume.CreateOptions{Name: v, Labels: labels}); err != nil {
					errs[i] = errors.Join(errs[i], err)
				}
			}
		}()
	}
	wg.Wait()
	return attempts * orphanResourcesPerAttempt, errors.Join(errs...)
}
