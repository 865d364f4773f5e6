package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/messages"
)

// measureEngineStop is B4's reference: the engine's own stop of a running
// container shaped like the worker (docker-init as PID 1, an unprivileged
// user, a task that sleeps), timed from the stop call to its return, Runs
// times. Forged's figure (deadline to worker stopped) includes this.
func (e *Env) measureEngineStop(ctx context.Context) (Summary, error) {
	var samples []time.Duration
	for range max(e.cfg.Runs, 1) {
		t, err := e.engineStopOnce(ctx)
		if err != nil {
			return Summary{}, err
		}
		samples = append(samples, t)
	}
	return Durations(samples), nil
}

func (e *Env) engineStopOnce(ctx context.Context) (time.Duration, error) {
	d, err := example.NewDispatch(example.DispatchOptions{Project: e.project, RunnerID: e.runnerID, RepoPath: e.repo})
	if err != nil {
		return 0, err
	}
	labels, names, err := e.resourcesOf(d)
	if err != nil {
		return 0, err
	}
	initProcess := true
	resp, err := e.engine.ContainerCreate(ctx, &container.Config{
		Image: example.BaseImage, Cmd: []string{"sleep", "300"}, Labels: labels,
		User: fmt.Sprintf("%d:%d", messages.WorkerUID, messages.WorkerGID),
	}, &container.HostConfig{NetworkMode: "none", Init: &initProcess, LogConfig: container.LogConfig{Type: "none"}}, nil, nil, names.Container)
	if err != nil {
		return 0, err
	}
	defer func() {
		_ = e.engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
	}()
	if err := e.engine.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return 0, err
	}
	time.Sleep(200 * time.Millisecond) // let the task start
	grace := 10
	start := time.Now()
	if err := e.engine.ContainerStop(ctx, resp.ID, container.StopOptions{Timeout: &grace}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// measureRSS is B5's process figures: the resident set of an idle daemon,
// then of the same daemon with QueuedAttempts waiting behind one running
// attempt (one slot), each sampled Runs times 200 ms apart. The attempts
// are cancelled afterwards.
func (e *Env) measureRSS(ctx context.Context) (idle, queued Summary, err error) {
	d, err := e.startDaemon(ctx, e.stateRoot("b5-daemon"), 1, e.cfg.QueuedAttempts)
	if err != nil {
		return idle, queued, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	time.Sleep(time.Second) // the start-up reaper round and preflight settle
	if idle, err = e.sampleRSS(d.pid()); err != nil {
		return idle, queued, err
	}
	var ids []string
	defer func() {
		cctx := context.WithoutCancel(ctx)
		var wg sync.WaitGroup
		for _, id := range ids {
			_ = d.cancel(cctx, id)
		}
		for _, id := range ids {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = d.outcome(cctx, id) }()
		}
		wg.Wait()
	}()
	for range e.cfg.QueuedAttempts + 1 {
		dispatch, err := e.newDispatch(d.stateRoot, []string{"/bin/sh", "-c", "sleep 600"}, 0)
		if err != nil {
			return idle, queued, err
		}
		if err := d.submit(ctx, dispatch); err != nil {
			return idle, queued, err
		}
		ids = append(ids, dispatch.AttemptID())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		snap, err := d.api.Snapshot(ctx)
		if err != nil {
			return idle, queued, err
		}
		if snap.Queued >= e.cfg.QueuedAttempts {
			break
		}
		if time.Now().After(deadline) {
			return idle, queued, fmt.Errorf("only %d of %d attempts queued after a minute", snap.Queued, e.cfg.QueuedAttempts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	queued, err = e.sampleRSS(d.pid())
	return idle, queued, err
}

// sampleRSS reads a process's RSS Runs times, 200 ms apart, in MiB.
func (e *Env) sampleRSS(pid int) (Summary, error) {
	var mib []float64
	for i := range max(e.cfg.Runs, 1) {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		rss, err := processRSS(pid)
		if err != nil {
			return Summary{}, err
		}
		mib = append(mib, float64(rss)/(1<<20))
	}
	return Summarize("MiB", mib), nil
}
