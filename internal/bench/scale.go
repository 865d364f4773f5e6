package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/forgedev/forged/messages"
)

// ScaleResult is B7 at one repository size: forged's attempt of the
// example's one-file task, and the native git floor of the same work on
// the host, measured alternately (attempt, floor) ScaleRuns times.
type ScaleResult struct {
	Size RepoSize `json:"size"`
	// PackBytes is the size of the repository's pack.
	PackBytes int64 `json:"packBytes"`
	// WorkspaceBytes is the workspace volume the dispatches asked for.
	WorkspaceBytes int64 `json:"workspaceBytes"`
	// Attempt is forged's whole attempt (the POST to the outcome);
	// Workspace is worker_started → workspace_materialized; Result is
	// task_exited → output_written (status, the commit of what the task
	// left, the result bundle).
	Attempt   Summary `json:"attempt"`
	Workspace Summary `json:"workspace"`
	Result    Summary `json:"result"`
	// The native floor, step by step: the host's `git bundle create` of
	// the input, `git clone` of that bundle with checkout, `git status`,
	// and a one-file commit.
	FloorBundle Summary `json:"floorBundle"`
	FloorClone  Summary `json:"floorClone"`
	FloorStatus Summary `json:"floorStatus"`
	FloorCommit Summary `json:"floorCommit"`
	// FloorFilesystem is where the floor's clone, status and commit ran:
	// "ext4 image" (a fresh one per run, made as the workspace volume is),
	// or "work directory (why not an image)" on the host's filesystem.
	FloorFilesystem string `json:"floorFilesystem,omitempty"`
	// Timeline is the event timeline of the attempt of median duration.
	Timeline []TimelineStep `json:"timeline,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// StepsFloor is the floor of the workspace and result steps (clone, status,
// commit), AttemptFloor that of the whole attempt (bundle added), in ms.
func (s ScaleResult) StepsFloor() float64 {
	return s.FloorClone.Median + s.FloorStatus.Median + s.FloorCommit.Median
}

func (s ScaleResult) AttemptFloor() float64 { return s.FloorBundle.Median + s.StepsFloor() }

// StepsMedian is the median over the runs of workspace + result.
func (s ScaleResult) StepsMedian() float64 { return s.Workspace.Median + s.Result.Median }

// bytesPerInode is mkfs.ext4's default inode ratio: a workspace image of
// B bytes has about B/16384 inodes (a 4 GiB image about 262k).
const bytesPerInode = 16 << 10

// workspaceBytesFor sizes the workspace volume for a repository: its
// files, directories and .git (about 1.3 inodes a file, doubled for what
// the task and git add) at mkfs.ext4's inode ratio, and at least 8 times
// the pack for the objects and the checkout; never below the default.
func workspaceBytesFor(size RepoSize, packBytes int64) int64 {
	inodes := int64(size.Files) * 13 / 10 * 2
	need := max(inodes*bytesPerInode, packBytes*8, int64(messages.DefaultWorkspaceBytes))
	const gib = 1 << 30
	need = (need + gib - 1) / gib * gib
	return min(need, int64(messages.MaxWorkspaceBytes))
}

// measureScale is B7: for each size, the synthetic repository (cached
// under ScaleCache), then ScaleRuns rounds of one forged attempt (a daemon
// with one slot) and one native floor.
func (e *Env) measureScale(ctx context.Context) ([]ScaleResult, error) {
	d, err := e.startDaemon(ctx, e.stateRoot("b7-daemon"), 1, 4)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.stop() }()
	vols, err := newFloorVolumes(e.cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = vols.Close() }()
	if vols.store == nil {
		e.cfg.Log.Warn("B7: the native floor runs on the host's filesystem, not on an ext4 image as the workspace", "reason", vols.reason)
	}
	var out []ScaleResult
	var firstErr error
	for _, size := range e.cfg.ScaleSizes {
		e.cfg.Log.Info("B7: repository scale", "files", size.Files, "commits", size.Commits, "runs", e.cfg.ScaleRuns)
		res, err := e.measureScaleOne(ctx, d, vols, size)
		if err != nil {
			res.Error = err.Error()
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", size, err)
			}
		}
		out = append(out, res)
	}
	return out, firstErr
}

func (e *Env) measureScaleOne(ctx context.Context, d *daemon, vols *floorVolumes, size RepoSize) (ScaleResult, error) {
	res := ScaleResult{Size: size, FloorFilesystem: vols.Where()}
	repo, err := syntheticRepo(ctx, e.cfg.ScaleCache, size)
	if err != nil {
		return res, err
	}
	packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "*.pack"))
	for _, p := range packs {
		if st, err := os.Stat(p); err == nil {
			res.PackBytes += st.Size()
		}
	}
	res.WorkspaceBytes = workspaceBytesFor(size, res.PackBytes)
	var attempts, workspace, result, bundle, clone, status, commit []time.Duration
	type timed struct {
		took  time.Duration
		steps []TimelineStep
	}
	var timelines []timed
	// One untimed attempt first: the image key follows the build context
	// of the repository's config commit, so each repository builds its
	// sandbox image once.
	for run := -1; run < max(e.cfg.ScaleRuns, 1); run++ {
		dispatch, err := e.newDispatchFor(d.stateRoot, repo, nil, 0)
		if err != nil {
			return res, err
		}
		dispatch.Sandbox.RequestedResources.WorkspaceBytes = res.WorkspaceBytes
		// The floor's git has every core: so has the attempt (one slot).
		dispatch.Sandbox.RequestedResources.CPUMillis = int64(runtime.NumCPU()) * 1000
		took, steps, err := d.runAttempt(ctx, dispatch)
		if err != nil {
			return res, err
		}
		ws, ok1 := stepBetween(steps, "worker_started", "workspace_materialized")
		rs, ok2 := stepBetween(steps, "task_exited", "output_written")
		if !ok1 || !ok2 {
			return res, fmt.Errorf("attempt %s lacks the worker's workspace or result events", dispatch.AttemptID())
		}
		_, _ = gitHost(ctx, e.cfg.ScaleCache, repo, "update-ref", "-d", "refs/heads/"+dispatch.Lease.WorktreeKey)
		if run < 0 {
			continue
		}
		attempts, workspace, result = append(attempts, took), append(workspace, ws), append(result, rs)
		timelines = append(timelines, timed{took, steps})

		f, err := nativeFloor(ctx, e.cfg.WorkDir, repo, vols, res.WorkspaceBytes)
		if err != nil {
			return res, fmt.Errorf("native floor: %w", err)
		}
		bundle, clone, status, commit = append(bundle, f[0]), append(clone, f[1]), append(status, f[2]), append(commit, f[3])
	}
	res.Attempt, res.Workspace, res.Result = Durations(attempts), Durations(workspace), Durations(result)
	res.FloorBundle, res.FloorClone, res.FloorStatus, res.FloorCommit = Durations(bundle), Durations(clone), Durations(status), Durations(commit)
	slices.SortFunc(timelines, func(a, b timed) int { return int(a.took - b.took) })
	res.Timeline = timelines[len(timelines)/2].steps
	return res, nil
}

// stepBetween is the time from the first event from to the first event to
// after it.
func stepBetween(steps []TimelineStep, from, to string) (time.Duration, bool) {
	start := -1.0
	for _, st := range steps {
		switch {
		case start < 0 && st.Event == from:
			start = st.AtMillis
		case start >= 0 && st.Event == to:
			return time.Duration((st.AtMillis - start) * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// nativeFloor does the attempt's git work with the host's git and nothing
// else, and times each step: the input bundle (`git bundle create` of
// main, as forged's preparation bundles the input's history, in the work
// directory), `git clone` of it with checkout, `git status`, and a commit
// of one new file. The clone goes to the root of a fresh volume of
// workspaceBytes (vols: an ext4 image as the worker's workspace, when it
// can), unmounted and removed afterwards whatever happened; the volume's
// making and unmounting are not timed.
func nativeFloor(ctx context.Context, workDir, repo string, vols *floorVolumes, workspaceBytes int64) (took [4]time.Duration, err error) {
	dir, err := os.MkdirTemp(workDir, "floor-")
	if err != nil {
		return took, err
	}
	defer os.RemoveAll(dir)
	clone, release, err := vols.Mount(ctx, workDir, workspaceBytes)
	if err != nil {
		return took, err
	}
	defer func() { err = errors.Join(err, release()) }()
	bundle := filepath.Join(dir, "input.bundle")
	steps := []func() error{
		func() error { return floorGit(ctx, dir, repo, "bundle", "create", "--quiet", bundle, "main") },
		// --branch: the bundle carries main without HEAD, and a clone
		// without it checks nothing out (git 2.39: "remote HEAD refers
		// to nonexistent ref"), which left the floor without its checkout.
		func() error {
			if err := floorGit(ctx, dir, "", "clone", "--quiet", "--branch", "main", bundle, clone); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(clone, syntheticPath(0))); err != nil {
				return fmt.Errorf("the floor's clone checked nothing out: %w", err)
			}
			return nil
		},
		func() error { return floorGit(ctx, dir, clone, "status", "--porcelain") },
		func() error {
			if err := os.WriteFile(filepath.Join(clone, "hello.txt"), []byte("hello from the floor\n"), 0o644); err != nil {
				return err
			}
			if err := floorGit(ctx, dir, clone, "add", "--", "hello.txt"); err != nil {
				return err
			}
			return floorGit(ctx, dir, clone, "commit", "--quiet", "-m", "one file")
		},
	}
	for i, step := range steps {
		start := time.Now()
		if err := step(); err != nil {
			return took, err
		}
		took[i] = time.Since(start)
	}
	return took, nil
}

func floorGit(ctx context.Context, home, dir string, args ...string) error {
	if dir == "" {
		dir = home
	}
	if out, err := gitHost(ctx, home, dir, args...); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, out)
	}
	return nil
}

// newDispatchFor is newDispatch for another repository than the sample.
func (e *Env) newDispatchFor(stateRoot, repo string, argv []string, lease time.Duration) (*messages.Dispatch, error) {
	d, err := e.newDispatch(stateRoot, argv, lease)
	if err != nil {
		return nil, err
	}
	d.Repo.LocalPath = repo
	return d, nil
}
