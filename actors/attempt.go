package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/teardown"
	"github.com/forgedev/forged/messages"
)

const kindAttempt = "attempt"

// workerStartedEvent is the worker's first event: its process is running
// and can take lease updates.
const workerStartedEvent = "worker_started"

// AttemptProps returns the props of one attempt actor. subscriber (may be
// nil) receives the attempt's events and its AttemptFinished; supervisor
// grants the build permit. The attempt is never restarted, so its producer
// runs once, and the child strategy it shares with its props is its own.
func AttemptProps(d *messages.Dispatch, subscriber, supervisor *actor.PID, cfg AttemptConfig, deps Deps) *actor.Props {
	cfg = cfg.withDefaults()
	children := newChildSupervisor()
	return actor.PropsFromProducer(func() actor.Actor {
		return &attemptActor{cfg: cfg, deps: deps, d: d, subscriber: subscriber, supervisor: supervisor, children: children}
	}, actor.WithSupervisor(children))
}

// attemptActor drives one attempt from admission to teardown. Its state is
// touched only in Receive. At most one host step runs at a time (inflight):
// each is a plain function of an input built here (attempt_steps.go), and
// its result comes back as a message. Children report with messages. What
// the attempt learns is kept in named parts (attempt_state.go): its input,
// its image, its sidecars, its worker, its time limits, its ledger and its
// verdict.
type attemptActor struct {
	cfg        AttemptConfig
	deps       Deps
	d          *messages.Dispatch
	adopted    *Adopted // set when the attempt is re-adopted (readopt.go)
	subscriber *actor.PID
	supervisor *actor.PID
	children   *childSupervisor // the strategy of AttemptProps: it knows each child's kind

	phase    string
	runCtx   context.Context
	cancel   context.CancelFunc
	fence    *fence
	inflight string // the host step in flight, "" when none

	in       attemptInput
	image    attemptImage
	sidecars sidecarSet // attempt_sidecars.go
	worker   attemptWorker
	timers   limitTimers // timelimit.go
	ledger   attemptLedger
	verdict  verdict

	watchdog, sampler, pusher *actor.PID

	tearingDown bool
	finished    bool
}

// childGone is the attempt's own, mailbox-ordered notice of a child's
// termination.
type childGone struct{ who *actor.PID }

// Internal step results.
type (
	prepareDone struct {
		prepared      *gitops.Prepared
		contract      *contract.Parsed
		security      []string
		serviceImages map[string]services.Entry
		egressImage   services.Entry
		// signatureWarnings are the upstream images left unverified
		// under adoption.
		signatureWarnings []signatureWarning
		// stateDigest is the digest of the adoption state file written
		// (readopt.go); "" when it could not be written.
		stateDigest string
		err         error
	}
	provisionDone struct {
		cacheMounts   []dockerops.CacheMount
		cachesMissing []string // read-only caches not warmed for the project
		bundlePlaced  bool     // the control image holds the input bundle
		err           error
	}
	collectDone struct {
		output *gitops.Output
		err    error
	}
	importDone struct {
		result  string
		report  gitops.ImportReport
		summary string // the worker's own summary: evidence, never a code
		err     error
	}
	teardownDone struct {
		result teardown.Result
	}
)

func (a *attemptActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *actor.Stopping:
		a.stopTimeLimits()
		if a.cancel != nil {
			a.cancel()
		}
		if a.deps.ImageRefs != nil {
			a.deps.ImageRefs.Release(a.d.AttemptID())
		}
		a.ledger.close()

	// Control.
	case messages.CancelAttempt:
		reason := msg.Reason
		if reason == "" {
			reason = "cancelled by request"
		}
		if msg.Code != "" {
			// Stopped with a failure of its own (the fleet's loss), not
			// cancelled.
			a.abort(ctx, failure.New(msg.Code, "%s", reason))
			return
		}
		if a.verdict.failure == nil && !a.tearingDown {
			a.verdict.cancelled = true // a cancel after another failure does not rename it
		}
		a.abort(ctx, failure.New(failure.SandboxCancelled, "%s", reason))
	case messages.RenewLease:
		a.onRenewLease(ctx, msg)
	case leasePushFailed:
		// The host's watchdog still holds the renewed lease; the worker
		// will stop at its old deadline unless a later push lands.
		a.emit(ctx, messages.FailureEvent("sandbox_lease_push_failed", fmt.Sprintf("Could not push the renewed lease into the worker: %v", msg.err), nil))
	case watchdogStarted:
		// A (re)started watchdog arms from the lease the attempt holds.
		ctx.Respond(leaseRenewed{expiresAt: a.fence.expiry()})
	case timeLimitFired:
		a.onTimeLimit(ctx, msg)
	case timeLimitGraceOver:
		a.onTimeLimitGraceOver(ctx)
	case LeaseExpired:
		a.abort(ctx, failure.New(failure.SandboxLeaseExpired, "the lease expired at %s", msg.ExpiresAt.UTC().Format(time.RFC3339)))

	// Host steps.
	case prepareDone:
		a.inflight = ""
		a.onPrepared(ctx, msg)
	case provisionDone:
		a.inflight = ""
		a.onProvisioned(ctx, msg)
	case collectDone:
		a.inflight = ""
		a.onCollected(ctx, msg)
	case importDone:
		a.inflight = ""
		a.onImported(ctx, msg)
	case publishDone:
		a.inflight = ""
		a.onPublished(ctx, msg)
	case teardownDone:
		a.inflight = ""
		a.onTornDown(ctx, msg)
	case asyncPanic:
		// The host step in flight is over.
		if msg.Step == a.inflight {
			a.inflight = ""
		}
		a.fail(failure.New(failure.SandboxRuntimeFailed, "%s", msg.Error()))
		a.advance(ctx)

	// Children.
	case BuildEvent:
		a.emit(ctx, msg.Event)
	case messages.BuildDone:
		a.onBuilt(ctx, msg)
	case messages.BuildFailed:
		a.fail(msg.Err)
		a.advance(ctx)
	case secretsDone:
		a.inflight = ""
		a.onSecretsWritten(ctx, msg)
	case SidecarStarted:
		a.onSidecarStarted(msg)
	case SidecarReady:
		a.onSidecarReady(ctx, msg)
	case SidecarFailed:
		a.onSidecarFailed(ctx, msg)
	case servicesTimedOut:
		a.onServicesTimedOut(ctx)
	case EgressAccess:
		a.onEgressAccess(ctx, msg)
	case EgressLogSummary:
		a.onEgressLogSummary(ctx, msg)
	case WorkerCreated:
		a.onWorkerCreated(ctx, msg)
	case WorkerOutput:
		if msg.Event.EventType == workerStartedEvent && msg.Event.Role == messages.RoleRunner {
			a.onWorkerRunning(ctx)
		}
		forwardToSampler(ctx, a.sampler, msg.Event)
		if msg.Replayed {
			break // delivered before a restart: the sampler's only
		}
		if msg.Logged {
			a.rearmIdleFrom(ctx, msg.Event.OccurredAt) // written while forged was away
		} else {
			a.rearmIdle(ctx)
		}
		a.onWorkerEvent(ctx, msg)
	case WorkerReattached:
		a.emit(ctx, messages.RunnerEvent("sandbox_reattached", fmt.Sprintf("Re-attached to the worker after the Docker engine restarted (live-restore kept it running); events resume at %d.", msg.ResumeAt),
			map[string]any{"agentContainer": map[string]string{"id": msg.ContainerID, "role": "agent"}, "eventSeq": msg.ResumeAt}))
	case WorkerExited:
		a.onWorkerExited(ctx, msg)
	case checkpointDone:
		a.onCheckpointDone(ctx, msg)
	case messages.MemorySampled:
		// For the console's memory chart: the metrics middleware keeps it.
	case *actor.Terminated:
		// Terminated is a system message: it can overtake the last user
		// messages the child sent (BuildDone, WorkerExited). Queue a user
		// message behind them before drawing conclusions.
		ctx.Send(ctx.Self(), childGone{who: msg.Who})
	case childGone:
		a.onChildTerminated(ctx, msg.who)

	case messages.Inspect:
		ctx.Respond(a.inspect(ctx))
	}
}

func (a *attemptActor) start(ctx actor.Context) {
	a.runCtx, a.cancel = context.WithCancel(context.Background())
	if a.adopted != nil {
		a.startAdopted(ctx)
		return
	}
	a.fence = newFence(a.cfg.Clock, a.d.Lease.FencingToken, a.d.Lease.ExpiresAt)
	a.ledger.writer = startLedgerWriter(ledger.Store{Root: a.cfg.StateRoot})
	a.setPhase(ctx, messages.PhasePreparing)
	key, err := lease.NewControlKey()
	if err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.worker.controlKey = key
	a.watchdog = a.children.spawn(ctx, newLeaseWatchdogProps(a.d.Lease.ExpiresAt, a.cfg.Clock), kindWatchdog)
	a.emit(ctx, messages.RunnerEvent("sandbox_preparing", fmt.Sprintf("Preparing Docker sandbox attempt %s.", a.d.AttemptID()), nil))
	conf, err := attemptConfinement(a.d, a.cfg.Confinement())
	if err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.in.confinement = conf
	a.in.isolation = cmp.Or(conf.Isolation, messages.IsolationRunc)
	if err := checkDispatchSupported(a.d, a.deps.Redeemer != nil, conf,
		networkPolicyConfig{egressEnabled: a.cfg.Egress.Enabled, allowOpenPublic: a.cfg.AllowOpenPublic}); err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	if err := a.checkStorage(ctx); err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	if err := a.checkProviderAuth(); err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	names, err := dockerops.NamesFor(a.d.AttemptID())
	if err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.in.names = names
	a.in.workDir = attemptWorkDir(a.cfg.StateRoot, names.AttemptHex)
	in := prepareInput{git: a.deps.Git, d: a.d, workDir: a.in.workDir, seccompProfile: a.cfg.SeccompProfile, lsmOption: a.cfg.LSMOption, confinement: conf, cachePolicy: a.cfg.Caches,
		verifier: a.deps.ImageVerifier, catalogue: a.cfg.Services, images: a.deps.Docker}
	a.step(ctx, "prepare", func(stepCtx context.Context) any { return prepareStep(stepCtx, in) })
}

// step runs one host step off the mailbox, on the attempt's run context
// (cancelled by abort). work must only use what its closure captured.
func (a *attemptActor) step(ctx actor.Context, name string, work func(context.Context) any) {
	a.inflight = name
	runAsync(ctx, a.runCtx, name, work)
}

func (a *attemptActor) onPrepared(ctx actor.Context, msg prepareDone) {
	if msg.err != nil {
		a.fail(msg.err)
	}
	if a.verdict.failure != nil {
		a.advance(ctx)
		return
	}
	a.in.prepared, a.in.contract, a.in.security, a.sidecars.serviceImages, a.sidecars.egressImage = msg.prepared, msg.contract, msg.security, msg.serviceImages, msg.egressImage
	a.in.stateDigest = msg.stateDigest
	for _, w := range msg.signatureWarnings {
		a.emit(ctx, messages.RunnerEvent("sandbox_image_signature_warning",
			fmt.Sprintf("The image %s is not verified (%s); adoption carries on.", w.image, w.reason),
			map[string]any{"image": w.image, "line": w.line, "reason": w.reason}))
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_input_prepared", "Prepared the input bundle and build context.", map[string]string{
		"inputCommitSha": msg.prepared.InputCommitSHA, "sandboxConfigCommitSha": msg.prepared.ConfigCommitSHA,
		"contractDigest": msg.contract.Digest, "contextDigest": msg.prepared.ContextDigest,
	}))
	a.setPhase(ctx, messages.PhaseBuilding)
	key := dockerops.ImageCacheKey(dockerops.ImageKeyInputs{
		ContextDigest:  msg.prepared.ContextDigest,
		ContractDigest: msg.contract.Digest,
		WorkerDigest:   a.cfg.WorkerDigest,
		Platform:       a.cfg.Platform,
		Policy:         a.d.Sandbox.ExecutionPolicy,
	})
	job := sandboxImageJob{
		attemptID:      a.d.AttemptID(),
		key:            key,
		project:        a.d.Repo.Name,
		openContext:    openContextOf(a.deps.Git, msg.prepared),
		labels:         imageLabels(a.d.Repo.Name, key),
		policy:         a.d.Sandbox.ExecutionPolicy,
		dockerfile:     msg.prepared.Dockerfile,
		secrets:        []string{a.d.Lease.FencingToken},
		configCommit:   msg.prepared.ConfigCommitSHA,
		contextDigest:  msg.prepared.ContextDigest,
		contractDigest: msg.contract.Digest,
	}
	builder := &imageBuilder{docker: a.deps.Docker, workerBinary: a.cfg.WorkerBinary, stateRoot: a.cfg.StateRoot, limits: a.cfg.BuildLimits, allowPulls: a.cfg.AllowBuildPulls,
		policy: a.deps.ImagePolicy, workerDigest: a.cfg.WorkerDigest, builderVersion: a.cfg.BuilderVersion}
	builder.archiver, _ = a.deps.Docker.(ImageArchiver)
	a.image.build = a.children.spawn(ctx, newBuildProps(a.runCtx, builder, job, a.supervisor, a.deps.ImageRefs), kindBuild)
}

func (a *attemptActor) onBuilt(ctx actor.Context, msg messages.BuildDone) {
	if a.verdict.failure != nil {
		return // teardown proceeds once the build actor terminates
	}
	a.image.id = msg.ImageID
	eventType := "sandbox_image_built"
	if msg.CacheHit {
		eventType = "sandbox_image_cache_hit"
	}
	a.emit(ctx, messages.RunnerEvent(eventType, fmt.Sprintf("Using sandbox image %s.", msg.ImageID), map[string]any{
		"imageDigest": msg.ImageID, "cacheKey": msg.Key, "cacheHit": msg.CacheHit,
	}))
	// The immutable inputs of the sandbox, as the seed announces them once
	// the image is resolved.
	metadata := map[string]string{
		"inputCommitSha": a.in.prepared.InputCommitSHA, "sandboxConfigCommitSha": a.in.prepared.ConfigCommitSHA,
		"contractDigest": a.in.contract.Digest, "imageDigest": a.image.id,
	}
	if att := msg.Attestations; att != nil {
		// The image policy's attestations, stored beside the build log.
		metadata["imagePolicyDigest"], metadata["imagePolicyStatus"] = att.PolicyDigest, att.Status
		for k, v := range map[string]string{"sbomPath": att.SBOMPath, "sbomDigest": att.SBOMDigest,
			"provenancePath": att.ProvenancePath, "provenanceDigest": att.ProvenanceDigest, "scanVerdict": att.Verdict} {
			if v != "" {
				metadata[k] = v
			}
		}
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_metadata", "Resolved immutable sandbox inputs.", metadata))
	labels, err := dockerops.Labels(a.d, a.image.id, a.in.contract.Digest)
	if err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.in.labels = labels
	a.setPhase(ctx, messages.PhaseProvisioning)
	// Posted here, on the mailbox, so that every later ledger write (a
	// renewal's) is ordered after it; the step waits until it is durable.
	planned := a.ledger.post(ledger.Starting, a.ledgerEntry(ledger.Starting))
	in := provisionInput{docker: a.deps.Docker, planned: planned, names: a.in.names, labels: a.in.labels, credentials: a.credentialsInput(),
		volumes: a.deps.Volumes, workspaceBytes: a.d.Sandbox.RequestedResources.Workspace(), bundlePath: a.in.prepared.BundlePath,
		caches: a.in.contract.Contract.Caches, project: a.d.Repo.Name, cacheBytes: a.cfg.CacheBytes,
		user: a.cfg.User.OrImage(), image: a.image.id}
	a.step(ctx, "provision", func(stepCtx context.Context) any { return provisionStep(stepCtx, in) })
}

func (a *attemptActor) onProvisioned(ctx actor.Context, msg provisionDone) {
	a.in.provisioned = true
	if msg.err != nil {
		a.fail(msg.err)
	}
	if a.verdict.failure != nil {
		a.advance(ctx)
		return
	}
	a.in.cacheMounts = msg.cacheMounts
	a.in.bundlePlaced = msg.bundlePlaced
	a.emitCachePolicy(ctx, msg.cachesMissing)
	if a.needsNetwork() {
		a.startServices(ctx)
		return
	}
	a.startWorker(ctx)
}

// startWorker spawns the worker once everything it needs is ready.
func (a *attemptActor) startWorker(ctx actor.Context) {
	job, err := a.workerJob()
	if err != nil {
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.setPhase(ctx, messages.PhaseRunning)
	a.worker.runtime = job.spec.Runtime
	a.worker.pid = a.children.spawn(ctx, newWorkerProps(a.deps.Docker, job), kindWorker)
}

func (a *attemptActor) onWorkerCreated(ctx actor.Context, msg WorkerCreated) {
	a.worker.containerID = msg.ContainerID
	a.worker.createdAt = a.cfg.Clock.Now()
	a.sealControlKey()
	a.armTimeLimits(ctx)
	a.writeLedger(ledger.Active)
	networkMode, networks := "none", []map[string]string{}
	if a.sidecars.network != "" {
		networkMode = a.sidecars.network
		networks = append(networks, map[string]string{"id": a.sidecars.networkID, "name": a.sidecars.network, "role": a.networkRole()})
	}
	if a.sidecars.egressNetworkID != "" {
		networks = append(networks, map[string]string{"id": a.sidecars.egressNetworkID, "name": egressNetworkName(a.in.names), "role": "egress"})
	}
	sampled := []SampledContainer{{ID: msg.ContainerID, Name: a.in.names.Container, Role: roleAgent, LimitBytes: a.d.Sandbox.RequestedResources.WorkerMemoryLimitBytes}}
	var sidecars []map[string]string
	for _, s := range a.in.contract.Contract.ServiceTypes() {
		if id := a.sidecars.containerID(serviceRole(s)); id != "" {
			name := services.ContainerName(a.in.names.Prefix, s)
			sidecars = append(sidecars, map[string]string{"id": id, "name": name, "role": serviceRole(s)})
			sampled = append(sampled, SampledContainer{ID: id, Name: name, Role: serviceRole(s)})
		}
	}
	if id := a.sidecars.containerID(roleEgressProxy); id != "" {
		name := egressContainerName(a.in.names)
		sidecars = append(sidecars, map[string]string{"id": id, "name": name, "role": roleEgressProxy})
		sampled = append(sampled, SampledContainer{ID: id, Name: name, Role: roleEgressProxy})
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_started", fmt.Sprintf("Docker sandbox %s started.", a.in.names.AttemptHex), map[string]any{
		"agentContainer":    map[string]string{"id": msg.ContainerID, "name": a.in.names.Container, "role": "agent"},
		"sidecarContainers": sidecars,
		"networkMode":       networkMode,
		"networks":          networks,
		"volumes":           a.startedVolumes(),
		"publishedPorts":    []any{},
		"runtimeLease":      a.runtimeLease("active"),
	}))
	if a.verdict.failure == nil {
		a.sampler = a.children.spawn(ctx, newMemorySamplerProps(a.d.AttemptID(), a.deps.Docker, a.deps.Kernel, a.cfg.Clock, a.cfg.SampleInterval, sampled, a.discardWorkspace()), kindSampler)
	}
}

func (a *attemptActor) onWorkerExited(ctx actor.Context, msg WorkerExited) {
	a.flushEvents(ctx, ^uint64(0)) // the worker said all it will say
	a.worker.exit = &msg
	a.stopTimeLimits()
	if msg.Err != nil {
		a.fail(msg.Err)
		a.advance(ctx)
		return
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_agent_exited", fmt.Sprintf("Sandbox worker exited with code %d.", msg.ExitCode), map[string]int{"workerExitCode": msg.ExitCode}))
	if a.adopted != nil && a.worker.eventSeq == 0 && msg.ExitCode != 0 {
		// Not one event of the worker verified, before the restart or
		// after: it never read its start packet (the previous process
		// died while handing it over), so the task never ran. Only the
		// worker signs events, so the task cannot fake this.
		a.fail(failure.New(failure.SandboxRunnerRestarted, "forged restarted while it handed the worker its start packet, so the task never ran; the attempt was reaped and not run again"))
	}
	if a.verdict.failure != nil {
		a.advance(ctx)
		return
	}
	a.setPhase(ctx, messages.PhaseCollecting)
	a.collectPeak(ctx, func() {
		a.verdict.trusted = a.resourceFailure()
		if a.verdict.failure != nil {
			a.advance(ctx)
			return
		}
		in := collectInput{docker: a.deps.Docker, git: a.deps.Git, workDir: a.in.workDir, containerID: a.worker.containerID, identity: a.identity(),
			recorded: a.recordExitSeen(), dropWorkspace: a.dropWorkspace(), copyOut: a.copyOutput(msg.ExitCode)}
		a.step(ctx, "collect", func(stepCtx context.Context) any { return collectStep(stepCtx, in) })
	})
}

// collectPeak asks the memory sampler for its record (without blocking the
// mailbox), records it, stops the sampler and continues with then.
func (a *attemptActor) collectPeak(ctx actor.Context, then func()) {
	if a.sampler == nil {
		then()
		return
	}
	sampler := a.sampler
	a.sampler = nil
	a.inflight = "peak memory"
	future := ctx.RequestFuture(sampler, PeakMemoryRequest{}, sampleTimeout+time.Second)
	ctx.ReenterAfter(future, func(res any, err error) {
		a.inflight = ""
		if report, ok := res.(SamplerReport); ok && err == nil {
			a.recordPeak(ctx, report)
		}
		ctx.Stop(sampler)
		then()
	})
}

func (a *attemptActor) recordPeak(ctx actor.Context, report SamplerReport) {
	a.worker.telemetry = report
	if report.Telemetry == nil {
		return
	}
	if a.ledger.written {
		a.writeLedger(a.ledger.state)
	}
	a.emit(ctx, peakMemoryEvent(report.Telemetry))
}

func (a *attemptActor) onCollected(ctx actor.Context, msg collectDone) {
	exit := a.worker.exit
	host := a.hostFailure()
	switch {
	case a.verdict.failure != nil:
	case host != nil && msg.err != nil:
		// The host's fact decides; the output could not be kept.
		a.failIn(messages.PhaseRunning, failure.Wrap(failure.CodeOf(host), msg.err, "%s; its output was not imported", failureMessage(host)))
	case host != nil:
		// The output validated: it is imported, and the host's code still
		// decides the outcome (onImported).
	case msg.err != nil && exit.ExitCode != 0 && failure.Is(msg.err, failure.SandboxOutputMissing):
		a.fail(failure.Wrap(failure.SandboxWorkerFailed, msg.err, "%s", dockerops.WorkerFailureMessage(exit.ExitCode, exit.Stderr, exit.State.Error)))
	case msg.err != nil:
		a.fail(msg.err)
	}
	if a.verdict.failure != nil {
		a.advance(ctx)
		return
	}
	a.setPhase(ctx, messages.PhaseImporting)
	in := importInput{git: a.deps.Git, d: a.d, output: msg.output, fence: a.fence}
	a.step(ctx, "import", func(stepCtx context.Context) any { return importStep(stepCtx, in) })
}

func (a *attemptActor) onImported(ctx actor.Context, msg importDone) {
	a.verdict.result, a.verdict.imported = msg.result, msg.report
	if host := a.hostFailure(); host != nil && a.verdict.failure == nil {
		// The seed's rule (applyTrustedHostFailure): the outcome is failed
		// with the host's code, the validated result still lands on the
		// managed branch, and the outcome says both; the worker's own
		// account is kept as the cause.
		a.failIn(messages.PhaseRunning, trustedOutcome(host, msg, a.d.Lease.WorktreeKey))
		a.verdict.causes = childCauses(a.worker.exit, msg.summary)
	}
	if msg.err != nil {
		a.fail(msg.err)
	} else if a.verdict.result != "" {
		data := map[string]any{
			"resultCommitSha": a.verdict.result, "branch": a.d.Lease.WorktreeKey,
			"commitCount": msg.report.Commits, "commits": msg.report.Newest,
		}
		content := fmt.Sprintf("Validated and imported sandbox output: %d commit(s).", msg.report.Commits)
		if msg.report.WorktreeLeft != "" {
			data["worktreeLeft"] = msg.report.WorktreeLeft
			content += fmt.Sprintf(" The branch moved, but the host worktree %s was left as it was: %s.", msg.report.WorktreeLeft, msg.report.WorktreeLeftReason)
		}
		a.emit(ctx, messages.RunnerEvent("sandbox_output_imported", content, data))
	} else {
		a.emit(ctx, messages.RunnerEvent("sandbox_output_unchanged", "The task changed nothing; the managed branch is unchanged.", nil))
	}
	if a.verdict.failure == nil && a.worker.exit.ExitCode != 0 {
		// The task failed while it ran; its output was still worth keeping.
		a.failIn(messages.PhaseRunning, failure.New(failure.SandboxWorkerFailed, "%s", strings.TrimSpace(fmt.Sprintf(
			"Sandbox worker exited with code %d; its output was validated and imported. %s %s",
			a.worker.exit.ExitCode, text.OneLine(msg.summary, 500), diagnostic(a.worker.exit)))))
	}
	// A failed task's result is kept on the host branch but never published.
	if a.verdict.failure == nil && a.verdict.result != "" && a.d.Sandbox.PublicationMode == messages.PublicationBridgePush {
		a.startPublish(ctx)
		return
	}
	a.verdict.pipelineDone = true
	a.advance(ctx)
}

func diagnostic(exit *WorkerExited) string {
	d := text.OneLine(exit.State.Error+" "+exit.Stderr, 1000)
	if d == "" {
		return ""
	}
	return "Worker diagnostic: " + d
}

// fail records the attempt's first failure, and the phase it happened in;
// later ones are consequences.
func (a *attemptActor) fail(err error) { a.failIn(a.phase, err) }

// failIn records the attempt's first failure as having happened in phase.
func (a *attemptActor) failIn(phase string, err error) { a.verdict.failIn(phase, err) }

// abort cancels whatever runs and leads to teardown as soon as the step in
// flight and the active children have reported.
func (a *attemptActor) abort(ctx actor.Context, err error) {
	if a.tearingDown {
		return
	}
	a.fail(err)
	a.fence.cancel()
	a.cancel()
	if a.image.build != nil {
		ctx.Send(a.image.build, CancelBuild{})
	}
	if a.worker.pid != nil {
		ctx.Send(a.worker.pid, CancelWorker{})
	}
	a.cancelSidecars(ctx)
	a.advance(ctx)
}

// advance moves a failed attempt to teardown once nothing is in flight; a
// successful attempt goes to teardown after its import. Teardown starts
// exactly once.
func (a *attemptActor) advance(ctx actor.Context) {
	if a.tearingDown || a.inflight != "" || a.image.build != nil || a.worker.pid != nil {
		return
	}
	if a.verdict.failure == nil && !a.verdict.pipelineDone {
		return
	}
	if a.sidecars.alive() {
		// Teardown waits for every sidecar actor's calls to return, so
		// that no create races it; they stop once cancelled.
		a.cancelSidecars(ctx)
		return
	}
	a.beginTeardown(ctx)
}

func (a *attemptActor) onChildTerminated(ctx actor.Context, who *actor.PID) {
	a.children.forget(who)
	switch {
	case who.Equal(a.image.build):
		a.image.build = nil
		if a.image.id == "" {
			a.fail(failure.New(failure.SandboxBuildFailed, "the build actor stopped before the image was ready"))
		}
		a.advance(ctx)
	case who.Equal(a.worker.pid):
		a.worker.pid = nil
		a.flushEvents(ctx, ^uint64(0))
		if a.worker.exit == nil {
			a.fail(failure.New(failure.SandboxRuntimeFailed, "the worker actor stopped before the worker exited"))
		}
		a.advance(ctx)
	case who.Equal(a.watchdog):
		a.watchdog = nil
		if !a.finished {
			a.abort(ctx, failure.New(failure.SandboxRuntimeFailed, "the lease watchdog failed; the lease can no longer be enforced"))
		}
	case who.Equal(a.sampler):
		a.sampler = nil
	case who.Equal(a.pusher):
		a.pusher = nil // renewals are no longer pushed; the watchdog still holds them
	default:
		a.onSidecarTerminated(ctx, who)
	}
}

func (a *attemptActor) setPhase(ctx actor.Context, phase string) {
	a.phase = phase
	if a.supervisor != nil {
		ctx.Send(a.supervisor, messages.AttemptPhaseChanged{AttemptID: a.d.AttemptID(), Phase: phase})
	}
}

// emit delivers one event to the subscriber, after the worker events held
// for their checkpoint (readopt.go), in order.
func (a *attemptActor) emit(ctx actor.Context, ev messages.Event) {
	if len(a.worker.pending) > 0 {
		a.worker.pending = append(a.worker.pending, pendingEvent{ev: ev})
		return
	}
	a.send(ctx, ev)
}

// send delivers one event to the subscriber now.
func (a *attemptActor) send(ctx actor.Context, ev messages.Event) {
	if a.subscriber != nil {
		ctx.Send(a.subscriber, messages.AttemptEvent{AttemptID: a.d.AttemptID(), Event: ev})
	}
}

// failureCode returns err's code, or sandbox_runtime_failed for uncoded
// errors (which are never trusted to choose a code).
func failureCode(err error) failure.Code {
	if code := failure.CodeOf(err); code != "" {
		return code
	}
	if errors.Is(err, context.Canceled) {
		return failure.SandboxCancelled
	}
	return failure.SandboxRuntimeFailed
}

// openContextOf is the build's way to its context: prepared's, written by
// git (both immutable, safe on the build's goroutine).
func openContextOf(git Git, prepared *gitops.Prepared) func(context.Context, string) (*os.File, error) {
	return func(ctx context.Context, dir string) (*os.File, error) { return git.OpenContext(ctx, prepared, dir) }
}
