package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/config"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/imagesig"
	"github.com/forgedev/forged/internal/publish/providerauth"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// runnerFlags are the flags shared by the commands that embed forged.
type runnerFlags struct {
	stateRoot      string
	lockRoot       string
	workerBinary   string
	slots          int
	sandboxUIDBase int
	queue          int
	buildPermits   int
	managedNS      string
	verbose        bool
	sampleInterval time.Duration
	reapInterval   time.Duration
	reapGrace      time.Duration
	hardWall       time.Duration
	idleTimeout    time.Duration
	providerAuth   []string
	providerTTL    time.Duration
	verifyCommand  string
	verifyTimeout  time.Duration
	imagePolicy    imagePolicyFlags
	allowPulls     bool
	buildNoFile    int64
	buildMemory    int64
	buildPIDs      int64
	cacheModes     string
	cacheBytes     int64
	requireBounded bool
	repoRoots      []string
	remotes        remoteFlags
	// gvisorServices runs an attempt's services under gVisor with its
	// worker.
	gvisorServices bool
	preflight      preflightFlags
	publish        publishFlags
	network        networkFlags
}

// preflightFlags are the admission settings shared with `forged preflight`.
type preflightFlags struct {
	allowRootful      bool
	hostReservedCores int
	hostReserveBytes  int64
	minWorkspaceBytes int64
	diskHigh          float64
	diskLow           float64
	serviceCatalogue  string
	isolation         string
	// allowGVisorDispatch and requiredIsolation offer gVisor on a runc
	// floor: to dispatches that ask, and to sandbox_required ones.
	allowGVisorDispatch bool
	requiredIsolation   string
	// gvisorProbeImage is the image of preflight's runsc probe containers.
	gvisorProbeImage string
	seccompProfile   string
	lsmOption        string
	allowDesktop     bool
}

func (p *preflightFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.allowRootful, "allow-rootful", true, "accept a Docker engine that does not run rootless (the recommended set-up: attempt volumes are bounded); false demands a rootless engine, whose volumes are unbounded")
	cmd.Flags().IntVar(&p.hostReservedCores, "host-reserved-cores", 1, "CPU cores kept for the host (0 keeps none)")
	cmd.Flags().Int64Var(&p.hostReserveBytes, "host-reserve-bytes", 2<<30, "memory kept for the host, in bytes")
	cmd.Flags().Int64Var(&p.minWorkspaceBytes, "min-workspace-bytes", 10<<30, "free bytes of the Docker root directory below which the disk is low")
	cmd.Flags().Float64Var(&p.diskHigh, "disk-high-watermark", 0.90, "used ratio (0..1) of the Docker root directory at which the disk becomes low")
	cmd.Flags().Float64Var(&p.diskLow, "disk-low-watermark", 0.80, "used ratio (0..1) at which a low disk recovers")
	cmd.Flags().StringVar(&p.isolation, "isolation", messages.IsolationRunc, "the host's isolation floor: runc, or gvisor (every worker runs under the engine's runsc runtime with no network; the host is unavailable while runsc does not work, and services, public_allowlist and open_public are refused; see docs/gvisor.md)")
	cmd.Flags().BoolVar(&p.allowGVisorDispatch, "allow-gvisor-dispatch", false, "under the runc floor, let a dispatch ask for gVisor (sandbox.isolation gvisor): its worker runs under runsc as under --isolation gvisor, and preflight probes runsc; refused with sandbox_isolation_unavailable while runsc does not work (docs/gvisor.md)")
	cmd.Flags().StringVar(&p.requiredIsolation, "sandbox-required-isolation", messages.IsolationRunc, "the isolation sandbox_required dispatches demand: runc (the floor), or gvisor (their workers run under runsc, and preflight probes it; refused with sandbox_isolation_unavailable while runsc does not work; docs/gvisor.md)")
	cmd.Flags().StringVar(&p.gvisorProbeImage, "gvisor-probe-image", preflight.DefaultGVisorProbeImage, "the image of preflight's runsc and runsc-net probe containers, a reference or id the engine holds (it is never pulled), whose dmesg prints the kernel's log (busybox: scripts/example.sh builds the default); see docs/gvisor.md")
	cmd.Flags().BoolVar(&p.allowDesktop, "allow-docker-desktop", preflight.DesktopAllowedByEnv(), "accept a Docker Desktop engine (macOS, Windows) although it is not rootless; its memory is measured in its VM (default: the seed's "+preflight.DesktopEnv+"=true; untested on a real Mac)")
	cmd.Flags().StringVar(&p.seccompProfile, "seccomp-profile", "", "absolute path of a seccomp profile for workers (required with sandbox_required)")
	cmd.Flags().StringVar(&p.lsmOption, "lsm", "", "LSM security option for workers, e.g. apparmor=NAME (required with sandbox_required)")
	cmd.Flags().StringVar(&p.serviceCatalogue, "service-catalogue", "", "the service catalogue (scripts/service-images.sh writes bin/services.tsv); without one, contracts declaring services are refused")
}

// services loads the service catalogue, when one is configured.
func (p *preflightFlags) services() (*services.Catalogue, error) {
	if p.serviceCatalogue == "" {
		return nil, nil
	}
	return services.Load(p.serviceCatalogue)
}

// offersGVisor reports whether some workers run under gVisor on a runc
// floor (so preflight probes runsc).
func (p *preflightFlags) offersGVisor() bool {
	return p.allowGVisorDispatch || p.requiredIsolation == messages.IsolationGVisor
}

// validate refuses settings the preflight would otherwise clamp silently.
func (p *preflightFlags) validate() error {
	switch {
	case p.hostReservedCores < 0:
		return fmt.Errorf("--host-reserved-cores %d is negative", p.hostReservedCores)
	case p.hostReserveBytes <= 0:
		return fmt.Errorf("--host-reserve-bytes %d must be positive", p.hostReserveBytes)
	case p.minWorkspaceBytes <= 0:
		return fmt.Errorf("--min-workspace-bytes %d must be positive", p.minWorkspaceBytes)
	case p.diskHigh < 0.01 || p.diskHigh > 0.99:
		return fmt.Errorf("--disk-high-watermark %g is outside [0.01, 0.99]", p.diskHigh)
	case !preflight.ValidIsolation(p.isolation):
		return fmt.Errorf("--isolation %q is neither runc nor gvisor", p.isolation)
	case !preflight.ValidIsolation(p.requiredIsolation):
		return fmt.Errorf("--sandbox-required-isolation %q is neither runc nor gvisor: set it (FORGED_SANDBOX_REQUIRED_ISOLATION, sandboxRequiredIsolation) to one of them", p.requiredIsolation)
	case preflight.CheckProbeImage(p.gvisorProbeImage) != nil:
		return fmt.Errorf("--gvisor-probe-image: %v", preflight.CheckProbeImage(p.gvisorProbeImage))
	case p.diskLow < 0 || p.diskLow >= p.diskHigh:
		return fmt.Errorf("--disk-low-watermark %g must be at least 0 and below the high watermark %g", p.diskLow, p.diskHigh)
	}
	return nil
}

// policy sizes the preflight's verdict by the smallest attempt a dispatch
// may ask for: the host is unavailable only when not even that fits. Each
// dispatch's own resources are then held against the host by the
// supervisor's budget.
func (p *preflightFlags) policy(maxSlots int) preflight.CapacityPolicy {
	reserved := p.hostReservedCores
	if reserved == 0 {
		reserved = -1 // the policy's zero value means the default of one core
	}
	return preflight.CapacityPolicy{MaxSlots: maxSlots, HostReservedCores: reserved, HostReserveBytes: p.hostReserveBytes,
		WorkerMemoryBytes: messages.MinWorkerMemoryBytes, CPUMillisPerAttempt: messages.MinCPUMillis}
}

func (p *preflightFlags) disk() preflight.DiskPolicy {
	return preflight.DiskPolicy{MinimumWorkspaceBytes: p.minWorkspaceBytes, HighWatermark: p.diskHigh, LowWatermark: p.diskLow}
}

func (f *runnerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.stateRoot, "state-root", defaultStateRoot(), "forged's private state directory")
	cmd.Flags().StringVar(&f.lockRoot, "lock-root", filepath.Join(os.TempDir(), "forged"), "where forged keeps the Docker context lock: every forged on a host must use the same one")
	cmd.Flags().StringVar(&f.workerBinary, "worker-binary", "", "static forged-worker binary to put into sandbox images (default: forged-worker beside this executable)")
	cmd.Flags().IntVar(&f.slots, "slots", 2, "attempts that may run at once")
	cmd.Flags().IntVar(&f.queue, "queue", 16, "attempts that may wait for a slot")
	cmd.Flags().IntVar(&f.sandboxUIDBase, "sandbox-uid-base", supervisor.DefaultUIDBase, "first of the sandbox uids, one per slot (uid base+slot, gid equal): unused uids, at least 20000; under a rootless engine, inside its subordinate id range (at most 65536)")
	cmd.Flags().IntVar(&f.buildPermits, "build-permits", 0, "image builds that may run at once, one per image key (0: one per 2 cores and 4 GiB of memory, 1 to 4)")
	cmd.Flags().StringVar(&f.managedNS, "managed-namespace", messages.DefaultManagedNamespace, "ref prefix every dispatch's worktreeKey must lie below (refs/heads/…/)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "debug logging")
	cmd.Flags().BoolVar(&f.gvisorServices, "gvisor-services", false, "run the services (postgres, redis, the browser) of an attempt that runs under gVisor under gVisor too (the engine's runsc-net runtime), not under runc; their readiness probes and the egress proxy stay under runc (docs/gvisor.md)")
	cmd.Flags().DurationVar(&f.hardWall, "hard-wall", timelimit.DefaultHardWall, "longest a worker may run (60s to 8h); a dispatch's task timeout can only shorten it")
	cmd.Flags().DurationVar(&f.idleTimeout, "idle-timeout", timelimit.DefaultIdle, "longest a worker may go without output (60s up to the hard wall)")
	cmd.Flags().StringArrayVar(&f.providerAuth, "provider-auth", nil, "PROVIDER=/abs/helper: the helper that writes PROVIDER's credentials for one attempt into its working directory (repeatable)")
	cmd.Flags().BoolVar(&f.allowPulls, "allow-build-pulls", false, "let image builds pull an upstream image that is not present locally (never under sandbox_required)")
	cmd.Flags().Int64Var(&f.buildNoFile, "build-nofile", dockerops.DefaultBuildNoFile, "open files of an image build's RUN steps (the seed's range: 256 to 65536)")
	cmd.Flags().Int64Var(&f.buildMemory, "build-memory-bytes", dockerops.DefaultBuildMemory, "memory of an image build's RUN steps, in bytes, with no swap (the seed's range: 512 MiB to 16 GiB)")
	cmd.Flags().Int64Var(&f.buildPIDs, "build-pids", 0, "processes of an image build, all RUN steps together, through a cgroup parent (the seed's range: 128 to 4096, its value 512; 0: none). Needs forged as root beside a local rootful engine with the cgroupfs driver, else every build is refused with sandbox_build_policy_failed")
	cmd.Flags().StringVar(&f.verifyCommand, "image-verify-command", "", "absolute path of a cosign-compatible verification command (image reference in, exit status out) for upstream images; required by sandbox_required")
	cmd.Flags().DurationVar(&f.verifyTimeout, "image-verify-timeout", imagesig.DefaultTimeout, "deadline of one image verification")
	cmd.Flags().DurationVar(&f.providerTTL, "provider-auth-timeout", providerauth.DefaultTimeout, "deadline of one provider auth helper run")
	cmd.Flags().DurationVar(&f.sampleInterval, "sample-interval", 250*time.Millisecond, "period of the memory sampler (10ms to 30s)")
	cmd.Flags().DurationVar(&f.reapInterval, "reaper-interval", time.Minute, "period of the reaper's rounds")
	cmd.Flags().DurationVar(&f.reapGrace, "reaper-grace", 2*time.Minute, "labelled resources younger than this are never reaped")
	cmd.Flags().StringVar(&f.cacheModes, "cache-modes", caches.Policy{}.String(), "contract cache modes allowed: per_attempt, readonly, both (comma-separated) or none; a contract declaring another is refused with sandbox_caches_unsupported")
	cmd.Flags().Int64Var(&f.cacheBytes, "cache-bytes", caches.DefaultPerAttemptBytes, "size of each per-attempt cache volume, in bytes, when volumes are bounded")
	cmd.Flags().BoolVar(&f.requireBounded, "require-bounded-storage", false, "refuse every attempt (adoption too) with sandbox_storage_unbounded when attempt volumes are not bounded; sandbox_required attempts always are")
	cmd.Flags().StringArrayVar(&f.repoRoots, "repo-root", nil, "directory under which every dispatch's repo.localPath must lie, symlinks resolved (repeatable; default: any repository forged can read)")
	f.remotes.register(cmd)
	f.imagePolicy.register(cmd)
	f.preflight.register(cmd)
	f.publish.register(cmd)
	f.network.register(cmd)
	config.SetMin(cmd.Flags(), "cache-bytes", 64<<20)
	config.SetMin(cmd.Flags(), "slots", 1)
	config.SetMin(cmd.Flags(), "sandbox-uid-base", supervisor.MinUIDBase)
	config.SetMin(cmd.Flags(), "queue", 0)
	config.SetMin(cmd.Flags(), "build-permits", 0)
}

// config returns the runner's configuration, or an error naming the flag
// that is out of range.
func (f *runnerFlags) config(logger *slog.Logger) (runner.Config, error) {
	if err := f.preflight.validate(); err != nil {
		return runner.Config{}, err
	}
	limits, err := timelimit.Operator(f.hardWall, f.idleTimeout)
	if err != nil {
		return runner.Config{}, fmt.Errorf("--hard-wall/--idle-timeout: %w", err)
	}
	var auth actors.ProviderAuth
	if len(f.providerAuth) > 0 {
		adapters, err := providerauth.Parse(f.providerAuth, f.providerTTL)
		if err != nil {
			return runner.Config{}, err
		}
		auth = adapters
	}
	var verifier actors.ImageVerifier
	if f.verifyCommand != "" {
		v, err := imagesig.New(f.verifyCommand, f.verifyTimeout)
		if err != nil {
			return runner.Config{}, err
		}
		verifier = v
	}
	imagePolicy, err := f.imagePolicy.policy()
	if err != nil {
		return runner.Config{}, err
	}
	egressOptions, err := f.network.options()
	if err != nil {
		return runner.Config{}, err
	}
	cachePolicy, err := caches.ParseModes(f.cacheModes)
	if err != nil {
		return runner.Config{}, fmt.Errorf("--cache-modes: %w", err)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
		min   time.Duration
	}{{"--sample-interval", f.sampleInterval, 10 * time.Millisecond}, {"--reaper-interval", f.reapInterval, time.Second}, {"--reaper-grace", f.reapGrace, 0}} {
		if d.value < d.min {
			return runner.Config{}, fmt.Errorf("%s %s is below %s", d.name, d.value, d.min)
		}
	}
	if err := dockerops.CheckBuildRanges(f.buildNoFile, f.buildMemory, f.buildPIDs); err != nil {
		return runner.Config{}, err
	}
	remotes, err := f.remotes.policy()
	if err != nil {
		return runner.Config{}, err
	}
	if f.sampleInterval > runner.MaxSampleInterval {
		return runner.Config{}, fmt.Errorf("--sample-interval %s is above %s: the memory telemetry's samples must be at most %s apart", f.sampleInterval, runner.MaxSampleInterval, runner.MaxSampleInterval)
	}
	return runner.Config{
		Slots:                    f.slots,
		SandboxUIDBase:           f.sandboxUIDBase,
		QueueLimit:               f.queue,
		BuildPermits:             f.buildPermits,
		StateRoot:                f.stateRoot,
		LockRoot:                 f.lockRoot,
		WorkerBinary:             f.workerBinary,
		SeccompProfile:           f.preflight.seccompProfile,
		LSMOption:                f.preflight.lsmOption,
		ManagedNamespace:         f.managedNS,
		Logger:                   logger,
		AllowRootful:             f.preflight.allowRootful,
		AllowDockerDesktop:       f.preflight.allowDesktop,
		Isolation:                f.preflight.isolation,
		AllowGVisorDispatch:      f.preflight.allowGVisorDispatch,
		SandboxRequiredIsolation: f.preflight.requiredIsolation,
		GVisorProbeImage:         f.preflight.gvisorProbeImage,
		GVisorServices:           f.gvisorServices,
		Capacity:                 f.preflight.policy(f.slots),
		Disk:                     f.preflight.disk(),
		SampleInterval:           f.sampleInterval,
		Limits:                   limits,
		ReapInterval:             f.reapInterval,
		ReapGrace:                f.reapGrace,
		ProviderAuth:             auth,
		ImageVerifier:            verifier,
		ImagePolicy:              imagePolicy,
		Version:                  version,
		Egress:                   egressOptions,
		AllowOpenPublic:          f.network.allowOpenPublic,
		AllowBuildPulls:          f.allowPulls,
		BuildLimits:              dockerops.BuildLimits{NoFile: f.buildNoFile, MemoryBytes: f.buildMemory, PIDs: f.buildPIDs},
		Caches:                   cachePolicy,
		CacheBytes:               f.cacheBytes,
		RequireBoundedStorage:    f.requireBounded,
		RepoRoots:                f.repoRoots,
		Remotes:                  remotes,
	}, nil
}

func (f *runnerFlags) logLevel() slog.Level {
	if f.verbose {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// interruptible is the command's context: cancelled by the first SIGINT or
// SIGTERM and, when limit is positive, after limit. Call the returned stop
// when the command ends.
func interruptible(cmd *cobra.Command, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	if limit <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	return ctx, func() { cancel(); stop() }
}
