package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/images/collector"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// SandboxEtcDir is the directory under the state root of the /etc/hosts
// and /etc/resolv.conf a worker on network none is given instead of the
// engine's network sandbox (dockerops.Client.WithSandboxEtc).
const SandboxEtcDir = "sandbox-etc"

// rootlessMaxUID is the last container uid a rootless engine maps with
// the usual subordinate range of 65536 ids (/etc/subuid).
const rootlessMaxUID = 65536

// New connects to Docker and starts the actor system, in two steps: build
// opens the engine clients and the context lock and wires the tree
// (nothing runs yet), start recovers what a previous process left behind
// and starts the tree. Whatever a failed New opened is released by the
// same path as Close.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	cfg, workerDigest, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	roots, err := resolveRepoRoots(cfg.RepoRoots)
	if err != nil {
		return nil, err
	}
	logs, err := OpenLogs(filepath.Join(cfg.StateRoot, EventsDir), 0)
	if err != nil {
		return nil, err
	}
	r := &Runner{logs: logs, metrics: cfg.Metrics, runnerID: cfg.RunnerID, instanceID: cfg.RunnerInstanceID, repoRoots: roots, remotes: cfg.Remotes, stateRoot: cfg.StateRoot, logger: cfg.Logger, closeTimeout: cfg.CloseTimeout}
	r.closers.push(logs.Close)
	plan, err := r.build(ctx, cfg, workerDigest)
	if err == nil {
		err = r.start(ctx, plan)
	}
	if err != nil {
		if releaseErr := r.release(); releaseErr != nil {
			err = errors.Join(err, releaseErr)
		}
		return nil, err // as it came, when the release went well
	}
	return r, nil
}

// startPlan is what build wires for start.
type startPlan struct {
	// reap is the start-up reaper round's configuration; skip leaves the
	// previous process's ledgers, temporary files and volume images alone.
	reap    reaper.Config
	skip    bool
	volumes *quota.Store // nil: attempt volumes are not bounded
	// supervisor is the root of the tree.
	supervisor *actor.Props
	// hostKey seals and opens the attempts' control keys (nil: nothing is
	// re-adopted); now is the configured clock's.
	hostKey []byte
	now     func() time.Time
	readopt bool // Config.Readopt
}

// build opens the engine clients and the context lock (each pushed on the
// closers as it is opened), takes the first preflight report, and wires
// the attempt factory and the supervisor. Nothing runs yet.
func (r *Runner) build(ctx context.Context, cfg Config, workerDigest string) (startPlan, error) {
	engine, err := preflight.NewEngineClient("")
	if err != nil {
		return startPlan{}, fmt.Errorf("runner: docker client: %w", err)
	}
	r.closers.push(engine.Close)
	lock, err := preflight.AcquireContextLock(cfg.LockRoot, engine.DaemonHost())
	if err != nil {
		return startPlan{}, err
	}
	r.closers.push(lock.Release)
	// Named after the runner, so that its reaper removes the build
	// cgroups a crash left (under the context lock: this runner's only).
	buildCgroups := cgroups.NewBuildCgroups(cgroups.Locator{}, cfg.RunnerID)
	docker, err := dockerops.Connect(ctx, dockerops.Options{BuildCgroups: buildCgroups})
	if err != nil {
		return startPlan{}, err
	}
	r.closers.push(docker.Close)
	r.images = engine

	policy := cfg.Capacity
	policy.MaxSlots = cfg.Slots
	cache := preflight.NewCacheWithClock(preflight.NewChecker(engine, nil, preflight.Options{
		AllowRootful: cfg.AllowRootful,
		Endpoint:     engine.DaemonHost(),
		StateRoot:    cfg.StateRoot,
		Capacity:     policy,
		Services:     ServiceCheck(cfg.Services, docker),
		Toolchains:   ToolchainCheck(engine),
		Disk:         cfg.Disk,
		Isolation:    docker,
		Clock:        cfg.Clock,

		IsolationFloor:   cfg.Isolation,
		GVisorRuntime:    cfg.GVisorRuntime,
		GVisorProbeImage: cfg.GVisorProbeImage,
		Runtimes:         runtimeProber(cfg.RuntimeProber, docker),
		ProbeGVisor:      offersGVisor(cfg),
		// Builds run with no network (dockerops.DefaultBuildNetwork): the
		// seed's enforced build egress.
		ImagePolicy: cfg.ImagePolicy.Complete(),

		GVisorNetworkRuntime: cfg.GVisorNetworkRuntime,
		SeccompProfile:       cfg.SeccompProfile,
		LSMOption:            cfg.LSMOption,

		AllowDockerDesktop: cfg.AllowDockerDesktop,
	}), 0, cfg.Clock)
	r.preflight = cache
	// The first report is taken now, so that admission starts from it.
	first, _ := cache.Current(ctx)
	if last := cfg.SandboxUIDBase + cfg.Slots - 1; first.Features.Rootless && last > rootlessMaxUID {
		// A rootless engine maps only its subordinate ids: a container
		// user past them cannot be created.
		return startPlan{}, fmt.Errorf("runner: the engine runs rootless, and the sandbox uids %d-%d lie past the %d ids its user namespace maps; set --sandbox-uid-base so that the range ends at or below %d (e.g. %d)",
			cfg.SandboxUIDBase, last, rootlessMaxUID, rootlessMaxUID, supervisor.MinUIDBase)
	}

	// Attempt volumes are bounded by the mechanism preflight found.
	var volumes actors.VolumeStore
	store := quota.NewStore(cfg.StateRoot, first.Storage, messages.WorkerUID, messages.WorkerGID)
	if store != nil {
		volumes = store
		docker = docker.WithVolumeImages(store)
		// The store's loop devices are mounted by the engine, so it runs
		// on this host: a worker on network none can be given its /etc
		// files from here instead of the engine's network sandbox.
		if etc, err := docker.WithSandboxEtc(filepath.Join(cfg.StateRoot, SandboxEtcDir)); err != nil {
			cfg.Logger.Warn("workers on network none keep the engine's network sandbox", "err", err)
		} else {
			docker = etc
		}
		r.closers.push(store.Close) // the drops of discarded workspaces in flight
	} else {
		cfg.Logger.Warn("attempt volumes are not bounded", "reason", first.Storage.Reason)
	}
	r.docker = docker
	storage := unboundedStorage(store != nil, first.Storage)
	isolation := isolationOf(cfg)

	ledgers := ledger.Store{Root: cfg.StateRoot}
	r.store = ledgers
	hostKey, err := ledgers.HostKey()
	if err != nil {
		cfg.Logger.Error("the state root's host key is unavailable; attempts will not be re-adoptable after a restart", "err", err)
		hostKey = nil
	}
	round := reaper.Config{RunnerID: cfg.RunnerID, RunnerInstanceID: cfg.RunnerInstanceID, Grace: cfg.ReapGrace, Now: cfg.Clock.Now,
		BuildCgroups: buildCgroups}
	attemptCfg := actors.AttemptConfig{
		StateRoot:           cfg.StateRoot,
		HostKey:             hostKey,
		WorkerBinary:        cfg.WorkerBinary,
		WorkerDigest:        workerDigest,
		BuilderVersion:      cfg.Version,
		Platform:            runtime.GOOS + "/" + runtime.GOARCH,
		SeccompProfile:      cfg.SeccompProfile,
		LSMOption:           cfg.LSMOption,
		Clock:               cfg.Clock,
		SampleInterval:      cfg.SampleInterval,
		Limits:              cfg.Limits,
		Services:            cfg.Services,
		ServiceReadyWithin:  cfg.ServiceReadyWithin,
		ServicesReadyWithin: cfg.ServicesReadyWithin,
		Egress:              cfg.Egress,
		AllowOpenPublic:     cfg.AllowOpenPublic,
		AllowBuildPulls:     cfg.AllowBuildPulls,
		BuildLimits:         cfg.BuildLimits,
		Caches:              cfg.Caches,
		CacheBytes:          cfg.CacheBytes,
		Confinement:         func() actors.Confinement { return confinementOf(cache, storage, isolation) },
	}
	attemptCfg.RequireBoundedStorage = cfg.RequireBoundedStorage
	var attemptDocker actors.Docker = docker
	if cfg.WrapDocker != nil {
		attemptDocker = cfg.WrapDocker(docker)
	}
	if cfg.WrapVolumes != nil && volumes != nil {
		volumes = cfg.WrapVolumes(volumes)
	}
	r.imageRefs = imagegc.NewRefs()
	deps := actors.Deps{
		Git: actors.GitHost{Runner: gitops.NewRunner(), StateRoot: cfg.StateRoot, ValidateRemote: cfg.ValidateRemote,
			ManagedNamespace: cfg.ManagedNamespace, PublishPolicy: *cfg.PublishPolicy, Remotes: cfg.Remotes},
		Docker:        attemptDocker,
		Redeemer:      cfg.Redeemer,
		ProviderAuth:  cfg.ProviderAuth,
		ImageVerifier: cfg.ImageVerifier,
		ImagePolicy:   cfg.ImagePolicy,
		Volumes:       volumes,
		ImageRefs:     r.imageRefs,
	}
	if cfg.Fence != nil {
		deps.Git = fencedGit{Git: deps.Git, fence: cfg.Fence}
	}
	var gc *actor.Props
	if cfg.ImageGC != nil {
		gc = collector.Props(collector.Config{
			API: engine, Refs: deps.ImageRefs, Policy: cfg.ImageGC.Policy, Interval: cfg.ImageGC.Interval,
			StateRoot: cfg.StateRoot, Clock: cfg.Clock, OnCollection: cfg.Metrics.ImageCollection,
			DiskLow: func(ctx context.Context) (bool, error) {
				report, _ := cache.Current(ctx)
				return report.Disk.Low, nil
			},
		})
	}
	// Every reaper round collects the stored build logs and attestations
	// by the seed's retention, the keys of running attempts kept.
	var auditPolicy imagegc.Policy
	if cfg.ImageGC != nil {
		auditPolicy = cfg.ImageGC.Policy
	}
	round.Audit = &reaper.AuditRetention{StateRoot: cfg.StateRoot, Policy: auditPolicy, Refs: r.imageRefs}
	sup := cfg.Metrics.Instrument(supervisor.Props(supervisor.Config{
		Slots:        cfg.Slots,
		UIDBase:      cfg.SandboxUIDBase,
		QueueLimit:   cfg.QueueLimit,
		BuildPermits: cfg.BuildPermits,
		Cleaner:      docker,
		Ledgers:      ledgers,
		Capacity:     cache,
		RunnerID:     cfg.RunnerID,
		Clock:        cfg.Clock,
		ManagedNS:    cfg.ManagedNamespace,
		Collector:    gc,
		Reaper: &supervisor.ReaperConfig{Store: ledgers, Docker: docker, Round: round, Interval: cfg.ReapInterval, Images: imageSweeper(store),
			OnRound: cfg.Metrics.ReaperRound},
		NewAttempt: func(d *messages.Dispatch, user messages.SandboxUser, subscriber, sup *actor.PID) *actor.Props {
			c := attemptCfg
			c.User = user
			return actors.AttemptProps(d, subscriber, sup, c, deps)
		},
		// r.adopted is set by start, before the supervisor starts.
		Adopt: func(system *actor.ActorSystem) []supervisor.Adoption {
			return r.adoptions(r.adopted, func(ad *actors.Adopted, subscriber, sup *actor.PID) *actor.Props {
				return actors.AdoptedAttemptProps(ad, subscriber, sup, attemptCfg, deps)
			})(system)
		},
	}), "supervisor")
	return startPlan{reap: round, skip: cfg.SkipStartupReap, volumes: store, supervisor: sup, hostKey: hostKey, now: cfg.Clock.Now, readopt: cfg.Readopt}, nil
}

// start recovers what a previous process left behind and starts the tree.
// Nothing of this process runs yet, and the context lock keeps other
// forged processes off this engine: every ledger left in the state root
// belongs to an attempt a previous process was running when it died (or
// left running when it detached). Those it can re-adopt (planAdoption)
// are live from the start; the start-up reaper round tears the others
// down, each reported with the code saying why it was not re-adopted, and
// the volume images of attempts not adopted are released.
func (r *Runner) start(ctx context.Context, plan startPlan) error {
	startup := plan.reap
	startup.SnapshotAvailable = true // an empty snapshot: only the adopted are live
	startup.DryRun = plan.skip
	adoption := adoptionPlan{live: map[string]bool{}, liveHex: map[string]bool{}}
	if !plan.skip && plan.readopt {
		adoption = r.planAdoption(ctx, startup.RunnerID, plan.hostKey, plan.now())
	}
	startup.Live = func(id string) bool { return adoption.live[id] }
	r.adopted = adoption.adopted
	if !plan.skip {
		if _, err := r.store.RemoveTemporaryFiles(); err != nil {
			r.logger.Warn("could not remove temporary ledger files", "err", err)
		}
	}
	restart, err := reaper.Run(ctx, startup, r.store, r.docker)
	if err != nil {
		r.logger.Error("start-up reaper round failed; the periodic reaper retries", "err", err)
	}
	if !plan.skip {
		r.metrics.ReaperRound(restart, err)
	}
	if plan.volumes != nil && !plan.skip {
		// Nothing is live yet: every image left is a dead process's.
		if released, err := plan.volumes.Sweep(ctx, func(hex string) bool { return adoption.liveHex[hex] }); err != nil {
			r.logger.Error("start-up release of volume images failed", "err", err, "released", released)
		} else if len(released) > 0 {
			r.logger.Info("released leftover volume images", "images", released)
		}
	}
	r.Restart = restart

	if err := r.startTree(plan.supervisor); err != nil {
		return err
	}
	for _, id := range restart.Reaped {
		if out, ok := r.logs.recordRestarted(id, adoption.verdicts[id]); ok {
			r.metrics.Finished(out)
		}
	}
	if !plan.skip {
		// The durable logs of the previous process's attempts that were
		// neither re-adopted nor reaped (queued, or gone before their first
		// ledger write) end too: none of them runs any more.
		for _, id := range r.logs.unfinished() {
			if adoption.live[id] {
				continue
			}
			if out, ok := r.logs.recordRestarted(id, adoption.verdicts[id]); ok {
				r.metrics.Finished(out)
			}
		}
	}
	r.metrics.WatchSnapshot(r.Snapshot)
	return nil
}

// startTree starts the actor system, with its work tracked, and spawns the
// root supervisor. From here on release stops the tree first.
func (r *Runner) startTree(sup *actor.Props) error {
	logger := r.logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger.With("component", "actor") }))
	t := &tree{system: system, work: actorkit.TrackWork(system), stopDead: r.metrics.WatchDeadLetters(system)}
	r.system, r.tree = system, t
	root, err := system.Root.SpawnNamed(sup, "supervisor")
	if err != nil {
		return fmt.Errorf("runner: spawn supervisor: %w", err)
	}
	r.root, t.root = root, root
	return nil
}

// imageSweeper is the store as the reaper's sweeper, nil without a store.
func imageSweeper(store *quota.Store) supervisor.ImageSweeper {
	if store == nil {
		return nil
	}
	return store
}

// runtimeProber is the configured prober, else the engine client.
func runtimeProber(configured preflight.RuntimeProber, docker *dockerops.Client) preflight.RuntimeProber {
	if configured != nil {
		return configured
	}
	return docker
}
