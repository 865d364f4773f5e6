package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/dockerops"
)

// noteRunner remembers a runner id whose labelled resources the final
// sweep removes.
// where names its user (a state root, or the baselines).
func (e *Env) noteRunner(runnerID, where string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runners == nil {
		e.runners = make(map[string]string)
	}
	e.runners[runnerID] = where
}

// runnerIDs are the runner ids the run has used so far.
func (e *Env) runnerIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return sortedKeys(e.runners)
}

// sweep removes whatever is still labelled with one of the run's runner
// ids (a measurement that failed half-way), containers first, and returns
// how many it found. Only the benchmark's own runner ids are touched.
func (e *Env) sweep(ctx context.Context) (int, error) {
	runners := e.runnerIDs()
	found := 0
	var errs []error
	gone := func(err error) error {
		if client.IsErrNotFound(err) {
			return nil
		}
		return err
	}
	for _, id := range runners {
		args := filters.NewArgs(filters.Arg("label", dockerops.LabelRunnerID+"="+id))
		containers, err := e.engine.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
		errs = append(errs, err)
		for _, c := range containers {
			found++
			e.cfg.Log.Warn("sweep: a container was left", "runner", id, "of", e.runners[id], "attempt", c.Labels[dockerops.LabelAttemptID], "names", c.Names)
			errs = append(errs, gone(e.engine.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})))
		}
		networks, err := e.engine.NetworkList(ctx, network.ListOptions{Filters: args})
		errs = append(errs, err)
		for _, n := range networks {
			found++
			e.cfg.Log.Warn("sweep: a network was left", "runner", id, "of", e.runners[id], "attempt", n.Labels[dockerops.LabelAttemptID], "name", n.Name)
			errs = append(errs, gone(e.engine.NetworkRemove(ctx, n.ID)))
		}
		volumes, err := e.engine.VolumeList(ctx, volume.ListOptions{Filters: args})
		errs = append(errs, err)
		for _, v := range volumes.Volumes {
			found++
			e.cfg.Log.Warn("sweep: a volume was left", "runner", id, "of", e.runners[id], "attempt", v.Labels[dockerops.LabelAttemptID], "name", v.Name)
			errs = append(errs, gone(e.engine.VolumeRemove(ctx, v.Name, true)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return found, fmt.Errorf("sweep: %w", err)
	}
	return found, nil
}
