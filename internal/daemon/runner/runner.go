package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/collector"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// requestTimeout bounds a request to the root supervisor.
const requestTimeout = 10 * time.Second

// Config configures an embedded forged.
type Config struct {
	// Slots and QueueLimit size admission.
	Slots      int
	QueueLimit int
	// SandboxUIDBase is the first of Slots sandbox uids, one per slot
	// (supervisor.ValidateUIDRange); 0 means supervisor.DefaultUIDBase.
	SandboxUIDBase int
	// BuildPermits is how many image builds may run at once, at most one
	// per image key; 0 derives it from the host (DefaultBuildPermits).
	BuildPermits int
	// StateRoot is forged's private state directory (created 0700).
	StateRoot string
	// WorkerBinary is the static forged-worker binary put into sandbox
	// images; empty means forged-worker beside the running executable
	// (see the package doc).
	WorkerBinary string
	// SeccompProfile and LSMOption are passed to every worker.
	SeccompProfile string
	LSMOption      string
	Logger         *slog.Logger
	// Fence, when set, is an outside authority's veto on moving a branch:
	// it is asked, with the repository lock held, right before an
	// attempt's result is imported and before it is published, after the
	// attempt's own lease and fencing token were checked; an error stops
	// the step (the fleet's record of an attempt declared lost).
	Fence func(ctx context.Context, attemptID string) error

	// BuildLimits confine image builds (zero fields: dockerops' defaults,
	// the seed's).
	BuildLimits dockerops.BuildLimits
	// AllowDockerDesktop accepts a Docker Desktop engine although it is
	// not rootless (preflight.Options.AllowDockerDesktop).
	AllowDockerDesktop bool

	// WrapDocker, when set, wraps the Docker client the attempts use. It
	// exists for fault-injection tests against the real engine.
	WrapDocker func(actors.Docker) actors.Docker
	// WrapVolumes, when set, wraps the bounded volume store the attempts
	// use (none without one), for the same tests.
	WrapVolumes func(actors.VolumeStore) actors.VolumeStore
	// AllowRootful accepts a Docker engine that does not run rootless.
	AllowRootful bool
	// Isolation is the host's isolation floor: messages.IsolationRunc
	// ("" means it) or messages.IsolationGVisor, under which every worker
	// runs under GVisorRuntime (default preflight.DefaultGVisorRuntime)
	// and the host is unavailable while that runtime does not work.
	// GVisorProbeImage is the preflight probe's image (default
	// preflight.DefaultGVisorProbeImage). GVisorNetworkRuntime is runsc's
	// registration with its own network stack (default
	// preflight.DefaultGVisorNetworkRuntime), under which the workers of
	// attempts with services or public_allowlist run under the floor.
	Isolation            string
	GVisorRuntime        string
	GVisorProbeImage     string
	GVisorNetworkRuntime string
	// RuntimeProber runs preflight's gVisor probe containers (nil: the
	// runner's own engine client). The tests give their runners one that
	// remembers each runtime's answer: a probe takes seconds, and every
	// test's runner would pay it again.
	RuntimeProber preflight.RuntimeProber
	// AllowGVisorDispatch lets a dispatch ask for gVisor
	// (sandbox.isolation gvisor) on a runc floor; SandboxRequiredIsolation
	// (messages.IsolationRunc, "" means it, or messages.IsolationGVisor)
	// is the isolation sandbox_required dispatches demand. Either makes
	// preflight probe runsc under the runc floor; a dispatch that gets
	// gVisor runs as under the gvisor floor, or is refused with
	// sandbox_isolation_unavailable while runsc does not work.
	AllowGVisorDispatch      bool
	SandboxRequiredIsolation string
	// GVisorServices runs the services (postgres, redis, the browser) of
	// an attempt that runs under gVisor under GVisorNetworkRuntime too,
	// not under runc (their readiness probes and the egress proxy stay
	// under runc). Off by default (docs/gvisor.md).
	GVisorServices bool
	// Capacity sizes one attempt and the host's reserve for the preflight
	// admission; its MaxSlots is Slots.
	Capacity preflight.CapacityPolicy
	// Disk bounds the disk pressure of the Docker root directory.
	Disk preflight.DiskPolicy
	// SampleInterval is the memory sampler's period (default 250ms).
	SampleInterval time.Duration
	// Limits are the attempts' time limits (timelimit.Operator validates
	// the operator's); zero takes the defaults, 8 h and 10 min.
	Limits timelimit.Limits
	// LockRoot holds the one-forged-per-Docker-context lock (default
	// TMPDIR/forged). Every forged on a host must use the same one.
	LockRoot string
	// RunnerID is this runner's id (default: kept in the state root);
	// RunnerInstanceID identifies this process (default: a new UUID).
	RunnerID         string
	RunnerInstanceID string
	// ReapInterval and ReapGrace tune the reaper (defaults 1 minute and 2
	// minutes: labelled resources younger than the grace are never reaped).
	ReapInterval time.Duration
	ReapGrace    time.Duration
	// ImageGC, when set, starts the image collector (package collector):
	// on its interval, when the preflight disk turns low, and on
	// CollectImagesNow, guarded by the attempts' image keys. Nil: off.
	ImageGC *ImageGCConfig
	// Redeemer redeems publication grants for bridge_push; nil refuses
	// bridge_push. ValidateRemote checks the redeemed remotes (nil: GitHub
	// only, as the seed requires). redeem.New builds both from the
	// operator's configuration (a credential helper or an HTTPS endpoint,
	// and the allowed hosts), as `forged run` and `forged daemon` do.
	Redeemer       actors.CredentialRedeemer
	ValidateRemote gitops.RemoteValidator
	// PublishPolicy is what a publication may carry (protected paths,
	// required author); nil means gitops.DefaultPublishPolicy (CI
	// configuration protected, authors as written). Refusals are
	// sandbox_output_publish_policy, before anything is pushed.
	PublishPolicy *gitops.PublishPolicy
	// Services is the operator's service catalogue (nil: contracts that
	// declare services are refused). ServiceReadyWithin and
	// ServicesReadyWithin override the readiness caps (defaults 60s per
	// service, 90s in all).
	Services            *services.Catalogue
	ServiceReadyWithin  time.Duration
	ServicesReadyWithin time.Duration
	// Egress is the egress proxy's configuration for public_allowlist
	// (Enabled false refuses it; its image is the Services catalogue's
	// egress entry). AllowOpenPublic lets open_public attempts run.
	Egress          egress.Options
	AllowOpenPublic bool
	// RequireBoundedStorage refuses adoption attempts too, with
	// sandbox_storage_unbounded, when attempt volumes are not bounded
	// (sandbox_required attempts always are refused then).
	RequireBoundedStorage bool
	// AllowBuildPulls lets image builds pull an upstream image that is not
	// present locally (never under sandbox_required); false refuses such a
	// build with sandbox_build_policy_failed before it starts.
	AllowBuildPulls bool
	// Caches is which contract cache modes are allowed (zero: both);
	// CacheBytes bounds each per-attempt cache volume when volumes are
	// bounded (zero: caches.DefaultPerAttemptBytes). See package caches.
	Caches     caches.Policy
	CacheBytes int64
	// Metrics is this runner's instrumentation (nil: a new one). One
	// Metrics serves one runner.
	Metrics *metrics.Metrics
	// ProviderAuth prepares the agents' provider credentials (see package
	// providerauth); nil refuses every dispatch that names a provider with
	// sandbox_auth_unavailable.
	ProviderAuth actors.ProviderAuth
	// ImageVerifier is the image-signature hook (imagesig.New); nil
	// verifies nothing: sandbox_required is refused with
	// sandbox_image_signature_invalid, adoption warns.
	ImageVerifier actors.ImageVerifier
	// ImagePolicy is the image policy (imagepolicy.New): SBOM, vulnerability
	// gate, signed provenance and the records cache hits need when it is
	// enforced; nil evaluates nothing.
	ImagePolicy *imagepolicy.Policy
	// Version is forged's version, as image provenance names the builder.
	Version string
	// RepoRoots are the directories under which a dispatch's
	// repo.localPath must lie, symlinks resolved (--repo-root); other
	// dispatches are refused with dispatch_repo_outside_roots. Empty
	// allows any repository forged can read.
	RepoRoots []string
	// Remotes is the policy for dispatches naming repo.remote
	// (--remote-protocols, --remote-fetch-timeout,
	// --remote-fetch-max-bytes): the zero policy refuses them with
	// dispatch_remote_refused. Mirrors live in StateRoot/mirrors.
	Remotes gitops.RemotePolicy
	// ManagedNamespace is the ref prefix ("refs/heads/…/") every dispatch's
	// worktree key must lie below; empty means refs/heads/forge/. Other
	// dispatches are refused with dispatch_invalid.
	ManagedNamespace string
	// SkipStartupReap leaves the previous process's ledgers alone at start
	// (for a dry run that must change nothing).
	SkipStartupReap bool
	// Readopt re-adopts, at start, the attempts a previous process left
	// running (see planAdoption); without it every one of them is reaped
	// (sandbox_runner_restarted), as a one-shot `forged run` wants: it
	// would stop them again when it exits. forged daemon sets it.
	Readopt bool
	// Clock drives every timer of the runner (capacity refresh and the
	// preflight report's age, reaper, lease watchdogs, samplers) and its
	// timestamps; nil means clock.System. Tests inject a clock.Manual.
	Clock clock.Clock
	// CloseTimeout bounds how long Close waits for the actor tree's work
	// still in flight (a teardown, a crashed attempt's cleanup) before it
	// gives up (default DefaultCloseTimeout); see Close.
	CloseTimeout time.Duration
}

// DefaultCloseTimeout is Close's default wait for the tree's work in
// flight: longer than one teardown's own bound (dockerops' 3 minutes), so
// that a teardown which honours its bound always finishes first.
const DefaultCloseTimeout = 4 * time.Minute

// Runner is an embedded forged: an actor system with its root supervisor.
type Runner struct {
	system    *actor.ActorSystem
	root      *actor.PID
	docker    *dockerops.Client
	preflight *preflight.Cache
	logs      *Logs
	metrics   *metrics.Metrics
	store     ledger.Store
	runnerID  string
	// instanceID is this process's runner instance id (Config.RunnerInstanceID).
	instanceID string
	repoRoots  repoRoots
	// remotes is the policy for repo.remote dispatches; stateRoot holds
	// their mirrors.
	remotes   gitops.RemotePolicy
	stateRoot string
	images    imagegc.EngineAPI
	imageRefs *imagegc.Refs
	logger    *slog.Logger
	// closers release what New opened, newest first; tree is the running
	// actor tree, nil until start spawned it. See release.
	closers      closers
	tree         *tree
	closeTimeout time.Duration
	releaseOnce  sync.Once
	releaseErr   error
	// adopted are the attempts start re-adopts (the supervisor spawns them
	// when it starts).
	adopted []*actors.Adopted
	// hold is the admission hold (hold.go).
	hold admissionHold
	// Restart is the reaper round run at start-up: the attempts a previous
	// process left behind, torn down and reported sandbox_runner_restarted.
	Restart reaper.Round
}

// Metrics returns the runner's instrumentation.
func (r *Runner) Metrics() *metrics.Metrics { return r.metrics }

// Logs returns the runner's per-attempt event logs.
func (r *Runner) Logs() *Logs { return r.logs }

// Submit admits a dispatch. Its events and outcome are recorded in Logs.
func (r *Runner) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	if held := r.hold.get(); held != nil {
		reply := heldReply(d, held)
		r.metrics.Submitted(reply)
		return reply, nil
	}
	if refused, ok := admitRepo(d, r.repoRoots, r.remotes); !ok {
		r.logger.Warn("refused a dispatch's repository", "attempt", d.AttemptID(), "code", refused.Code)
		r.metrics.Submitted(refused)
		return refused, nil
	}
	log, ok := r.logs.Open(d.AttemptID())
	if !ok {
		reply := messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.AttemptDuplicate),
			Message: fmt.Sprintf("attempt %s is running or finished within the last %s; an attempt id is never reused", d.AttemptID(), RetainFor)}
		r.metrics.Submitted(reply)
		return reply, nil
	}
	subscriber := r.system.Root.Spawn(r.metrics.Instrument(subscriberProps(log, r.metrics), "subscriber"))
	res, err := r.system.Root.RequestFuture(r.root, messages.SubmitAttempt{Dispatch: d, Subscriber: subscriber}, requestTimeout).Result()
	if err != nil {
		r.system.Root.Stop(subscriber)
		r.logs.discard(d.AttemptID(), log)
		return messages.SubmitReply{}, fmt.Errorf("submit: %w", err)
	}
	reply := res.(messages.SubmitReply)
	r.metrics.Submitted(reply)
	if !reply.Accepted {
		r.system.Root.Stop(subscriber)
		r.logs.discard(d.AttemptID(), log)
	}
	return reply, nil
}

// Cancel asks for an attempt to be cancelled.
func (r *Runner) Cancel(attemptID, reason string) (bool, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.CancelAttempt{AttemptID: attemptID, Reason: reason}, requestTimeout).Result()
	if err != nil {
		return false, fmt.Errorf("cancel: %w", err)
	}
	return res.(messages.CancelReply).Found, nil
}

// Abort ends a queued or running attempt as a failure with code (the
// fleet stops an attempt it declared lost with sandbox_runner_lost); found
// is false for an attempt this runner does not have.
func (r *Runner) Abort(attemptID string, code failure.Code, reason string) (bool, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.CancelAttempt{AttemptID: attemptID, Reason: reason, Code: code}, requestTimeout).Result()
	if err != nil {
		return false, fmt.Errorf("abort: %w", err)
	}
	return res.(messages.CancelReply).Found, nil
}

// Renew extends a running attempt's lease (same fencing token, strictly
// later expiry).
func (r *Runner) Renew(attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.RenewLease{AttemptID: attemptID, FencingToken: fencingToken, ExpiresAt: expiresAt}, requestTimeout).Result()
	if errors.Is(err, actor.ErrDeadLetter) {
		// The attempt stopped between the supervisor's lookup and delivery.
		return messages.RenewLeaseReply{AttemptID: attemptID, Code: string(failure.AttemptNotFound), Message: "the attempt has finished"}, nil
	}
	if err != nil {
		return messages.RenewLeaseReply{}, fmt.Errorf("renew: %w", err)
	}
	return res.(messages.RenewLeaseReply), nil
}

// RunnerID is this runner's id; dispatches must carry it.
func (r *Runner) RunnerID() string { return r.runnerID }

// RunnerInstanceID is this process's runner instance id: random per
// process (unless the configuration names one), so a restarted runner has
// another. A fleet member publishes it in its directory entry and refuses
// a forwarded dispatch chosen against another instance.
func (r *Runner) RunnerInstanceID() string { return r.instanceID }

// Reap runs one reaper round now (dryRun: only list what it would remove).
func (r *Runner) Reap(dryRun bool, snapshot *reaper.Snapshot) (reaper.Round, error) {
	res, err := r.system.Root.RequestFuture(r.root, supervisor.ReapNow{DryRun: dryRun, Snapshot: snapshot}, 6*time.Minute).Result()
	if err != nil {
		return reaper.Round{}, fmt.Errorf("reap: %w", err)
	}
	result := res.(supervisor.ReapResult)
	return result.Round, result.Err
}

// ImageGCConfig configures the daemon's image collector.
type ImageGCConfig struct {
	Policy   imagegc.Policy
	Interval time.Duration // default 1 h; the disk is checked every minute
}

// CollectImagesNow asks the daemon's image collector (a child of the
// supervisor) for a collection and waits for its report. Without a
// collector (Config.ImageGC nil) it fails.
func (r *Runner) CollectImagesNow(dryRun bool) (imagegc.Report, error) {
	res, err := r.system.Root.RequestFuture(r.root, collector.CollectNow{DryRun: dryRun}, 31*time.Minute).Result()
	if err != nil {
		return imagegc.Report{}, fmt.Errorf("image collection: %w", err)
	}
	reply := res.(collector.CollectReply)
	return reply.Report, reply.Err
}

// CollectImages runs one image collection beside the running attempts:
// the image keys they hold are kept, and an attempt acquiring a key waits
// while its images are being removed. req.Refs is set here; a zero req.Now
// is now.
func (r *Runner) CollectImages(ctx context.Context, req imagegc.Request) (imagegc.Report, error) {
	req.Refs = r.imageRefs
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	return imagegc.Collect(ctx, r.images, req)
}

// CleanupReports lists the cleanup reports not yet acknowledged.
func (r *Runner) CleanupReports() ([]messages.CleanupReport, error) { return r.store.PendingReports() }

// AcknowledgeReport removes an acknowledged cleanup report.
func (r *Runner) AcknowledgeReport(reportID string) error { return r.store.AcknowledgeReport(reportID) }

// Snapshot returns the supervisor's counts.
func (r *Runner) Snapshot() (messages.Snapshot, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.SnapshotRequest{}, requestTimeout).Result()
	if err != nil {
		return messages.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	snap := res.(messages.Snapshot)
	snap.AdmissionHeld = r.hold.get()
	snap.Repositories = r.repositories()
	return snap, nil
}

// Inspect walks the actor tree from the root supervisor and returns every
// actor's InspectReply, parents before children. Actors that stop during
// the walk are skipped.
func (r *Runner) Inspect() []messages.InspectReply {
	var out []messages.InspectReply
	queue := []*actor.PID{r.root}
	for len(queue) > 0 && len(out) < 1024 {
		pid := queue[0]
		queue = queue[1:]
		res, err := r.system.Root.RequestFuture(pid, messages.Inspect{}, 2*time.Second).Result()
		if err != nil {
			continue
		}
		reply, ok := res.(messages.InspectReply)
		if !ok {
			continue
		}
		out = append(out, reply)
		for _, child := range reply.Children {
			queue = append(queue, actor.NewPID(r.system.Address(), child))
		}
	}
	return out
}

// Preflight returns the latest preflight report, checking when stale.
func (r *Runner) Preflight(ctx context.Context) preflight.Report {
	report, _ := r.preflight.Current(ctx)
	return report
}

// Docker exposes the Docker client (for the example's base image).
func (r *Runner) Docker() *dockerops.Client { return r.docker }

// Drain cancels every admitted attempt and waits until all have torn down,
// or ctx ends. Attempts that are queued are cancelled without running.
func (r *Runner) Drain(ctx context.Context, reason string) error {
	cancelled := map[string]bool{}
	for {
		snap, err := r.Snapshot()
		if err != nil {
			return err
		}
		if len(snap.Attempts) == 0 && snap.Queued == 0 {
			return nil
		}
		for _, id := range snap.Attempts {
			if !cancelled[id] {
				cancelled[id] = true
				if _, err := r.Cancel(id, reason); err != nil {
					return err
				}
			}
		}
		for _, id := range r.logs.unfinished() {
			if !cancelled[id] {
				cancelled[id] = true
				if _, err := r.Cancel(id, reason); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %w (%d attempts still running)", ctx.Err(), len(snap.Attempts))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServiceCheck reports the service catalogue's state for preflight.
func ServiceCheck(c *services.Catalogue, docker services.ImageInspector) func(context.Context) []preflight.ServiceImage {
	if c == nil {
		return nil
	}
	return func(ctx context.Context) []preflight.ServiceImage {
		var out []preflight.ServiceImage
		for _, st := range c.Check(ctx, docker) {
			out = append(out, preflight.ServiceImage{Service: st.Service, Ref: st.Ref, ImageID: st.ImageID, State: st.State, Detail: st.Detail})
		}
		return out
	}
}

// confinementOf turns the latest preflight report into the attempts'
// confinement facts; without a report nothing is known.
// storage is the runner's own verdict on its volumes (unboundedStorage),
// fixed at start: the volume store is chosen once.
// The isolation floor and the workers' runtime are the operator's
// (isolationOf), whatever the report says.
func confinementOf(cache *preflight.Cache, storage error, iso actors.Confinement) actors.Confinement {
	r, _, ok := cache.Last()
	if !ok {
		return actors.Confinement{NetworkIsolation: failure.New(failure.SandboxNetworkIsolation, "no preflight report yet"), Storage: storage,
			Isolation: iso.Isolation, Runtime: iso.Runtime, NetworkRuntimeErr: "no preflight report yet",
			OfferGVisor: iso.OfferGVisor, RequiredIsolation: iso.RequiredIsolation, GVisorErr: "no preflight report yet", GVisorServices: iso.GVisorServices}
	}
	conf := actors.Confinement{
		Security:          dockerops.EngineSecurity{Known: r.Engine.Reachable, Seccomp: r.Features.Seccomp, LSM: slices.Clone(r.Features.LSM)},
		NetworkIsolation:  r.Network.NetworkErr(),
		Storage:           storage,
		Isolation:         iso.Isolation,
		Runtime:           iso.Runtime,
		OfferGVisor:       iso.OfferGVisor,
		RequiredIsolation: iso.RequiredIsolation,
		GVisorServices:    iso.GVisorServices,
	}
	// A worker under gVisor (the floor, or a dispatch's on a runc floor)
	// on an attempt network runs under runsc's network registration, once
	// its probe passed.
	if g := r.Isolation.GVisorNetwork; g.Works {
		conf.NetworkRuntime = g.Runtime
	} else {
		conf.NetworkRuntimeErr = fmt.Sprintf("runtime %q does not work: %s", g.Runtime, g.Reason)
	}
	if g := r.Isolation.GVisor; g.Works {
		conf.GVisorRuntime = g.Runtime
	} else {
		conf.GVisorErr = fmt.Sprintf("runtime %q does not work: %s", g.Runtime, g.Reason)
	}
	return conf
}

// offersGVisor reports whether cfg, on a runc floor, runs some workers
// under gVisor.
func offersGVisor(cfg Config) bool {
	return cfg.AllowGVisorDispatch || cfg.SandboxRequiredIsolation == messages.IsolationGVisor
}

// isolationOf is the floor and the workers' runtime of cfg: runsc (or
// cfg.GVisorRuntime) under the gvisor floor, the engine's default
// otherwise.
func isolationOf(cfg Config) actors.Confinement {
	policy := actors.Confinement{OfferGVisor: cfg.AllowGVisorDispatch, RequiredIsolation: cfg.SandboxRequiredIsolation, GVisorServices: cfg.GVisorServices}
	if cfg.Isolation != messages.IsolationGVisor {
		policy.Isolation = messages.IsolationRunc
		return policy
	}
	rt := cfg.GVisorRuntime
	if rt == "" {
		rt = preflight.DefaultGVisorRuntime
	}
	policy.Isolation, policy.Runtime = messages.IsolationGVisor, rt
	return policy
}

// unboundedStorage is nil when the runner bounds attempt volumes (it has a
// volume store), otherwise the refusal sandbox_required dispatches get.
func unboundedStorage(bounded bool, facts messages.StorageFacts) error {
	if bounded {
		return nil
	}
	reason := facts.Reason
	if reason == "" {
		reason = "preflight could not tell how to bound them"
	}
	return failure.New(failure.SandboxStorageUnbounded, "attempt volumes are not bounded on this runner (%s); see forged preflight", reason)
}

// prepareStateRoot creates the state root, or tightens an existing one, to
// mode 0700: it holds ledgers, attempt inputs and the daemon's socket. A
// state root that is not a directory owned by this process's uid is
// refused.
func prepareStateRoot(path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("runner: state root: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("runner: state root: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("runner: state root %s is not a directory", path)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("runner: state root %s is owned by uid %d, not by forged's uid %d", path, st.Uid, os.Getuid())
	}
	if info.Mode().Perm() != 0o700 {
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("runner: tighten state root: %w", err)
		}
	}
	return nil
}
