package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
)

// Config sizes one benchmark run.
type Config struct {
	// ForgedBinary is the static forged binary (scripts/bench.sh builds
	// bin/forged), the measured program. The forged processes it starts
	// put into their images the forged-worker binary beside it, which
	// scripts/bench.sh builds as bin/forged-worker.
	ForgedBinary string
	// WorkDir is the run's scratch directory (repository, state roots,
	// private TMPDIR, daemon logs).
	WorkDir string
	// Busybox is Debian's static busybox, for the base image.
	Busybox string
	// Runs is N for B1, B4's engine stop and B5's RSS figures.
	Runs int
	// BurstAttempts at BurstCapacity, BurstRuns times (B2).
	BurstAttempts, BurstCapacity, BurstRuns int
	// ReapResources orphaned resources, ReapRuns times (B6).
	ReapResources, ReapRuns int
	// QueuedAttempts waiting in the daemon for B5's RSS figure.
	QueuedAttempts int
	// GoBench runs the Go benchmarks (B3, B4, B5) from RepoRoot with
	// GoBenchTime iterations each.
	GoBench     bool
	RepoRoot    string
	GoBenchTime int
	Log         *slog.Logger
	// Isolation is the forged processes' isolation floor (--isolation:
	// "runc" or "gvisor"; "" the default, runc). The seed CLI and the
	// floor variants run under runc whatever it is.
	Isolation string
	// KeepBaseImage leaves the example's base image even when this run
	// built it: the test suite shares it as a fixture between packages.
	KeepBaseImage bool
	// ScaleSizes are B7's synthetic repositories (none skips B7), each
	// measured ScaleRuns times; ScaleCache keeps the generated
	// repositories between runs.
	ScaleSizes []RepoSize
	ScaleRuns  int
	ScaleCache string
	// UpgradedForged is another build of forged (scripts/bench.sh stamps
	// another version into it) for B8, measured Runs rounds; empty skips
	// B8.
	UpgradedForged string
}

// Env is the set-up shared by every measurement of one run.
type Env struct {
	cfg    Config
	engine *client.Client
	docker *dockerops.Client
	repo   string
	// imageID is the agent image forged built in the warm-up; the seed CLI
	// and the floor run the same image.
	imageID string
	// imagesToRemove is the base image when this run built it.
	imagesToRemove []string
	// project names the sample repository in every dispatch: the images
	// forged builds for the run carry it as a label, and are removed by it.
	project string
	// runnerID owns the seed CLI's and the floor's resources (labels).
	runnerID string
	mu       sync.Mutex
	runners  map[string]string // runner id → its user, for the sweep's account
	// Leftovers counts what the final sweep found still labelled with one
	// of the run's runner ids (0 when every measurement cleaned up).
	Leftovers int
}

// Setup connects to the engine, builds the base image and the sample
// repository, and warms forged's image cache with one untimed attempt.
func Setup(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	engine, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, engine: engine, repo: filepath.Join(cfg.WorkDir, "repo"), runnerID: ids.NewUUID(), project: "forged-bench-" + ids.NewUUID()[:8]}
	e.noteRunner(e.runnerID, "seed CLI, floor, B4 engine stop")
	e.docker, err = dockerops.Connect(ctx, dockerops.Options{})
	if err != nil {
		return nil, err
	}
	if _, found, err := e.docker.ImageID(ctx, example.BaseImage); err != nil {
		return nil, err
	} else if !found && !cfg.KeepBaseImage {
		e.imagesToRemove = append(e.imagesToRemove, example.BaseImage)
	}
	if _, err := example.BuildBaseImage(ctx, e.docker, cfg.Busybox); err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	if err := example.CreateRepo(ctx, e.repo, example.RepoOptions{}); err != nil {
		return nil, err
	}
	cfg.Log.Info("warm-up: one untimed forged run builds the sandbox image")
	_, out, err := e.forgedRun(ctx, e.stateRoot("warmup"))
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if e.imageID, err = out.imageID(); err != nil {
		return nil, err
	}
	return e, nil
}

// stateRoot returns a fresh state root for one forged.
func (e *Env) stateRoot(name string) string {
	return filepath.Join(e.cfg.WorkDir, "state-"+name)
}

// Close removes whatever labelled resource of the run's runners is left
// (Leftovers counts them), then the images the run created, and closes the
// clients. The scratch directory is the caller's.
func (e *Env) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	found, err := e.sweep(ctx)
	e.Leftovers = found
	errs = append(errs, err)
	if report, err := imagegc.RemoveProject(ctx, e.engine, dockerops.LabelValue(e.project)); err != nil {
		errs = append(errs, fmt.Errorf("remove the run's sandbox images: %w", err))
	} else if len(report.Failed) > 0 {
		errs = append(errs, fmt.Errorf("%d of the run's sandbox images not removed: %s", len(report.Failed), report.Failed[0].Error))
	}
	for _, ref := range e.imagesToRemove {
		if _, err := e.engine.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !client.IsErrNotFound(err) {
			errs = append(errs, fmt.Errorf("image remove %s: %w", ref, err))
		}
	}
	errs = append(errs, e.docker.Close(), e.engine.Close())
	return errors.Join(errs...)
}

// sandboxAttempt is one attempt the seed CLI or the floor runs: a
// dispatch, its names and labels, its input bundle (prepared before the
// clock starts) and the worker's start packet.
type sandboxAttempt struct {
	d       *messages.Dispatch
	names   dockerops.Names
	labels  map[string]string
	env     []string
	bundle  string
	packet  []byte
	outDir  string
	workDir string
}

const benchContractDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// resourcesOf is the labels and names forged gives the resources of d's
// attempt, for the containers and volumes the benchmark makes itself.
func (e *Env) resourcesOf(d *messages.Dispatch) (map[string]string, dockerops.Names, error) {
	labels, err := dockerops.Labels(d, e.imageID, benchContractDigest)
	if err != nil {
		return nil, dockerops.Names{}, err
	}
	names, err := dockerops.NamesFor(d.AttemptID())
	return labels, names, err
}

// prepareAttempt makes a dispatch owned by the benchmark's runner id,
// bundles its input with forged's own host git code, and builds the start
// packet the worker expects.
func (e *Env) prepareAttempt(ctx context.Context, argv []string) (*sandboxAttempt, error) {
	d, err := example.NewDispatch(example.DispatchOptions{Project: e.project, RunnerID: e.runnerID, RepoPath: e.repo, Argv: argv})
	if err != nil {
		return nil, err
	}
	d.Lease.WorktreeKey = "forge/bench-" + d.Sandbox.DispatchAttemptID[:8]
	d.Sandbox.RequestedResources.CPUMillis = benchCPUMillis
	labels, names, err := e.resourcesOf(d)
	if err != nil {
		return nil, err
	}
	workDir, err := os.MkdirTemp(e.cfg.WorkDir, "attempt-")
	if err != nil {
		return nil, err
	}
	prepared, err := gitops.Prepare(ctx, gitops.NewRunner(), gitops.PrepareRequest{
		RepoPath: e.repo, AttemptID: d.AttemptID(), WorktreeKey: d.Lease.WorktreeKey, BaseBranch: d.BaseBranch,
		DefaultBranch: d.Repo.DefaultBranch, ExecutionPolicy: d.Sandbox.ExecutionPolicy, WorkDir: workDir,
	})
	if err != nil {
		return nil, fmt.Errorf("prepare input: %w", err)
	}
	// The CLI's `docker cp` keeps the host file's mode: the worker
	// (uid 10001) must be able to read it.
	if err := os.Chmod(prepared.BundlePath, 0o644); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	packet, err := json.Marshal(messages.StartPacket{
		SchemaVersion: messages.StartPacketSchema,
		Identity: messages.SandboxIdentity{
			DispatchAttemptID: d.Sandbox.DispatchAttemptID, ExecutionLeaseID: d.Sandbox.ExecutionLeaseID,
			FencingToken: d.Lease.FencingToken, RunnerInstanceID: d.Sandbox.RunnerInstanceID,
			InputCommitSHA: prepared.InputCommitSHA, Branch: d.Lease.WorktreeKey,
			ContractDigest: benchContractDigest, ImageDigest: e.imageID,
		},
		Task: d.Task, WorkingDirectory: messages.WorkspaceDir, LeaseExpiresAt: d.Lease.ExpiresAt,
		LeaseControlKey: base64.RawURLEncoding.EncodeToString(key), TaskTimeoutSeconds: d.Task.TimeoutSeconds,
	})
	if err != nil {
		return nil, err
	}
	outDir := filepath.Join(workDir, "output")
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, err
	}
	return &sandboxAttempt{
		d: d, names: names, labels: labels, env: dockerops.WorkerEnv(d, prepared.InputCommitSHA),
		bundle: prepared.BundlePath, packet: append(packet, '\n'), outDir: outDir, workDir: workDir,
	}, nil
}

// workerSpec is the worker container of the attempt, as forged configures
// it.
func (a *sandboxAttempt) workerSpec(imageID string) dockerops.WorkerSpec {
	return dockerops.WorkerSpec{
		Name: a.names.Container, Image: imageID, Network: a.names.Network, WorkingDir: messages.WorkspaceDir,
		Labels: a.labels, Resources: a.d.Sandbox.RequestedResources, Env: a.env,
		WorkspaceVolume: a.names.WorkspaceVolume, ControlVolume: a.names.ControlVolume, SecretsVolume: a.names.SecretsVolume,
		Entrypoint: []string{messages.WorkerBinaryPath, "worker"},
	}
}

// checkOutput verifies that the worker left its manifest in outDir.
func (a *sandboxAttempt) checkOutput() error {
	if _, err := os.Stat(filepath.Join(a.outDir, messages.ManifestFile)); err != nil {
		return fmt.Errorf("attempt %s: the worker left no manifest: %w", a.d.AttemptID(), err)
	}
	return nil
}

func (a *sandboxAttempt) cleanup() { _ = os.RemoveAll(a.workDir) }
