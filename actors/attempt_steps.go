package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/contract"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/quota"
)

// Bounds of the output copied out of the sandbox.
const (
	maxOutputBytes   = 600 << 20
	maxOutputFiles   = 64
	provisionTimeout = 30 * time.Second
	copyOutTimeout   = 2 * time.Minute
)

func attemptWorkDir(stateRoot, attemptHex string) string {
	return filepath.Join(stateRoot, "attempts", attemptHex)
}

func imageLabels(project, key string) map[string]string {
	return map[string]string{
		"dev.forge.managed-image": "true",
		"dev.forge.project":       dockerops.LabelValue(project),
		"dev.forge.image-key":     key,
	}
}

// prepare reads the input from the host repository and validates the
// contract and the runner policy; nothing in Docker exists yet.
func (a *attemptActor) prepare(ctx context.Context) any {
	if err := os.MkdirAll(a.workDir, 0o700); err != nil {
		return prepareDone{err: failure.Wrap(failure.SandboxInputFailed, err, "create attempt directory")}
	}
	prepared, err := a.deps.Git.Prepare(ctx, a.d, a.workDir)
	if err != nil {
		return prepareDone{err: err}
	}
	parsed, err := contract.Parse(prepared.ContractSource)
	if err != nil {
		return prepareDone{err: err}
	}
	if err := checkContractSupported(a.d, parsed.Contract); err != nil {
		return prepareDone{err: err}
	}
	security, err := dockerops.ResolveSecurityOptions(a.d.Sandbox.ExecutionPolicy, a.cfg.SeccompProfile, a.cfg.LSMOption)
	if err != nil {
		return prepareDone{err: err}
	}
	return prepareDone{prepared: prepared, contract: parsed, security: security}
}

// startProvision records the planned resources in the ledger and creates
// them off the mailbox.
func (a *attemptActor) startProvision(ctx actor.Context) {
	planned := a.ledgerEntry(ledger.Starting)
	a.ledgerState, a.ledgerWritten = ledger.Starting, true
	a.step(ctx, "provision", func(stepCtx context.Context) any {
		// The ledger is durable before any Docker resource exists, so that
		// a crash from here on leaves something for the reaper to find.
		if err := <-a.ledger.write(planned); err != nil {
			return provisionDone{err: failure.Wrap(failure.SandboxCreateFailed, err, "write the attempt's ledger")}
		}
		return a.provision(stepCtx)
	})
}

// provision creates the attempt's internal network and volumes, each
// labelled with the attempt's ownership.
func (a *attemptActor) provision(ctx context.Context) any {
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, provisionTimeout) }
	callCtx, cancel := call()
	network, err := a.deps.Docker.CreateInternalNetwork(callCtx, a.names.Network, a.labels)
	cancel()
	if err != nil {
		return provisionDone{err: failure.Wrap(failure.SandboxCreateFailed, err, "create internal network")}
	}
	bounded, err := a.boundVolumes(ctx)
	if err != nil {
		return provisionDone{network: network, err: err}
	}
	for _, volume := range []string{a.names.WorkspaceVolume, a.names.ControlVolume, a.names.SecretsVolume} {
		callCtx, cancel := call()
		err := a.deps.Docker.CreateVolumeWithOptions(callCtx, volume, a.labels, bounded[volume])
		cancel()
		if err != nil {
			return provisionDone{network: network, err: failure.Wrap(failure.SandboxCreateFailed, err, "create volume %s", volume)}
		}
	}
	return provisionDone{network: network}
}

// boundVolumes makes the fixed-size filesystems of the workspace (the
// dispatch's workspaceBytes) and of the control volume (the input bundle
// and the output budget, with input/ and output/ made for the worker), and
// returns each volume's driver options. Without a volume store the
// volumes stay plain. The teardown releases whatever was made.
func (a *attemptActor) boundVolumes(ctx context.Context) (map[string]map[string]string, error) {
	if a.deps.Volumes == nil {
		return nil, nil
	}
	workspace := a.d.Sandbox.RequestedResources.Workspace()
	info, err := os.Stat(a.prepared.BundlePath)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "stat input bundle")
	}
	wsOpts, err := a.deps.Volumes.Provision(ctx, a.names.WorkspaceVolume, workspace)
	if err != nil {
		return nil, err
	}
	ctlOpts, err := a.deps.Volumes.Provision(ctx, a.names.ControlVolume, quota.ControlBytes(info.Size(), workspace), "input", "output")
	if err != nil {
		return nil, err
	}
	return map[string]map[string]string{a.names.WorkspaceVolume: wsOpts, a.names.ControlVolume: ctlOpts}, nil
}

// storageFull returns the check the worker runs once the container has
// exited: a description of every bounded volume the host finds full, or
// "" (nil without a volume store).
func (a *attemptActor) storageFull() func(ctx context.Context) string {
	if a.deps.Volumes == nil {
		return nil
	}
	store, volumes := a.deps.Volumes, []string{a.names.WorkspaceVolume, a.names.ControlVolume}
	return func(ctx context.Context) string {
		var full []string
		for _, v := range volumes {
			if u, err := store.Usage(ctx, v); err == nil && u.Full() {
				full = append(full, fmt.Sprintf("volume %s is full (%d of %d bytes free, %d inodes free, from the host's %s)",
					v, u.FreeBytes, u.TotalBytes, u.FreeInodes, u.Source))
			}
		}
		return strings.Join(full, "; ")
	}
}

// workerJob assembles the hardened worker container and its start packet.
func (a *attemptActor) workerJob() (workerJob, error) {
	timeout := a.d.Task.TimeoutSeconds
	if timeout == 0 {
		timeout = messages.DefaultTaskTimeoutSecs
	}
	a.packetExpiry = a.fence.expiry()
	packet := messages.StartPacket{
		SchemaVersion:      messages.StartPacketSchema,
		Identity:           a.identity(),
		Task:               a.d.Task,
		WorkingDirectory:   a.contract.Contract.WorkingDirectory,
		LeaseExpiresAt:     a.packetExpiry,
		LeaseControlKey:    a.controlKey,
		TaskTimeoutSeconds: timeout,
	}
	raw, err := json.Marshal(packet)
	if err != nil {
		return workerJob{}, fmt.Errorf("start packet: %w", err)
	}
	return workerJob{
		spec: dockerops.WorkerSpec{
			Name:            a.names.Container,
			Image:           a.imageID,
			Network:         a.names.Network,
			WorkingDir:      a.contract.Contract.WorkingDirectory,
			Labels:          a.labels,
			Resources:       a.d.Sandbox.RequestedResources,
			Env:             dockerops.WorkerEnv(a.d, a.prepared.InputCommitSHA),
			SecurityOpts:    a.security,
			WorkspaceVolume: a.names.WorkspaceVolume,
			ControlVolume:   a.names.ControlVolume,
			SecretsVolume:   a.names.SecretsVolume,
			Entrypoint:      []string{messages.WorkerBinaryPath, "worker"},
		},
		bundlePath:  a.prepared.BundlePath,
		startPacket: append(raw, '\n'),
		eventKey:    messages.EventKey(a.controlKey),
		storageFull: a.storageFull(),
		runTimeout:  time.Duration(timeout)*time.Second + runMargin,
		limits:      dockerops.RunLimits{},
	}, nil
}

// identity is what the worker must echo in its manifest.
func (a *attemptActor) identity() messages.SandboxIdentity {
	return messages.SandboxIdentity{
		DispatchAttemptID: a.d.Sandbox.DispatchAttemptID,
		ExecutionLeaseID:  a.d.Sandbox.ExecutionLeaseID,
		FencingToken:      a.d.Lease.FencingToken,
		RunnerInstanceID:  a.d.Sandbox.RunnerInstanceID,
		InputCommitSHA:    a.prepared.InputCommitSHA,
		Branch:            a.d.Lease.WorktreeKey,
		ContractDigest:    a.contract.Digest,
		ImageDigest:       a.imageID,
	}
}

// collect copies /control/output out of the stopped worker and validates it.
func (a *attemptActor) collect(ctx context.Context) any {
	outputDir := filepath.Join(a.workDir, "output")
	if err := os.RemoveAll(outputDir); err != nil {
		return collectDone{err: fmt.Errorf("clear output directory: %w", err)}
	}
	callCtx, cancel := context.WithTimeout(ctx, copyOutTimeout)
	defer cancel()
	if err := a.deps.Docker.CopyDirOut(callCtx, a.containerID, messages.OutputDir, outputDir, maxOutputBytes, maxOutputFiles); err != nil {
		return collectDone{err: err}
	}
	output, err := a.deps.Git.ValidateOutput(outputDir, a.identity())
	return collectDone{output: output, err: err}
}

func (a *attemptActor) beginTeardown(ctx actor.Context) {
	a.tearingDown = true
	a.collectPeak(ctx, func() { a.teardown(ctx) })
}

func (a *attemptActor) teardown(ctx actor.Context) {
	a.setPhase(ctx, messages.PhaseTearingDown)
	a.emit(ctx, messages.RunnerEvent("sandbox_teardown_started", fmt.Sprintf("Removing Docker resources for attempt %s.", a.d.AttemptID()), nil))
	owner := dockerops.OwnershipOf(a.d)
	a.inflight = "teardown"
	var releasing *ledger.Entry
	if a.ledgerWritten {
		e := a.ledgerEntry(ledger.Releasing)
		releasing = &e
		a.ledgerState = ledger.Releasing
	}
	store, writer, attemptID := ledger.Store{Root: a.cfg.StateRoot}, a.ledger, a.d.AttemptID()
	// Teardown must survive the attempt's cancellation: it runs on a
	// context detached from runCtx, bounded by its own timeout.
	teardownCtx := context.WithoutCancel(a.runCtx)
	runAsync(ctx, teardownCtx, "teardown", func(base context.Context) any {
		callCtx, cancel := context.WithTimeout(base, a.cfg.TeardownTimeout)
		defer cancel()
		if releasing != nil {
			<-writer.write(*releasing) // best effort: the teardown runs regardless
		}
		report, err := a.deps.Docker.Teardown(callCtx, owner, "teardown")
		// The report is durable before the attempt is acknowledged; the
		// ledger goes only once nothing remains, and is kept degraded
		// otherwise for the reaper to retry.
		if perr := store.PersistReport(report); perr != nil {
			err = errors.Join(err, fmt.Errorf("persist cleanup report: %w", perr))
		}
		if releasing != nil {
			if state := ledgerStateFor(report, err); state == ledger.Released {
				err = errors.Join(err, <-writer.remove(attemptID))
			} else {
				degraded := *releasing
				degraded.State = ledger.Degraded
				err = errors.Join(err, <-writer.write(degraded))
			}
		}
		return teardownDone{report: report, err: err}
	})
}

func (a *attemptActor) onTornDown(ctx actor.Context, msg teardownDone) {
	// Every ledger write was queued before the teardown's own, which it
	// awaited: the writer has nothing left to do.
	if a.ledger != nil {
		a.ledger.close()
		a.ledger = nil
	}
	report := msg.report
	degraded := msg.err != nil
	if degraded {
		a.emit(ctx, messages.RunnerEvent("teardown_failed", fmt.Sprintf("Docker resources for attempt %s require reaping: %v", a.d.AttemptID(), msg.err), report))
	} else {
		a.emit(ctx, messages.RunnerEvent("sandbox_teardown_completed", fmt.Sprintf("Removed Docker resources for attempt %s.", a.d.AttemptID()), report))
		if a.workDir != "" {
			_ = os.RemoveAll(a.workDir) // the attempt's private copies; nothing else refers to them
		}
	}
	outcome := a.outcome(report, degraded)
	if outcome.Status != messages.StatusSucceeded {
		a.emit(ctx, messages.RunnerEvent(outcome.Code, outcome.Message, map[string]string{"phase": outcome.Phase}))
	}
	a.finished = true
	a.setPhase(ctx, messages.PhaseFinished)
	finished := messages.AttemptFinished{Outcome: outcome}
	if a.subscriber != nil {
		ctx.Send(a.subscriber, finished)
	}
	if a.supervisor != nil {
		ctx.Send(a.supervisor, finished)
	}
	ctx.Stop(ctx.Self())
}

func (a *attemptActor) outcome(report messages.CleanupReport, degraded bool) messages.AttemptOutcome {
	out := messages.AttemptOutcome{
		AttemptID:          a.d.AttemptID(),
		Status:             messages.StatusSucceeded,
		ResultCommitSHA:    a.result,
		PublishedCommitSHA: a.published,
		PeakMemoryBytes:    a.peak.PeakBytes,
		Degraded:           degraded,
		Cleanup:            &report,
		FinishedAt:         time.Now().UTC(),
	}
	if a.workerExit != nil && a.workerExit.Err == nil {
		code := a.workerExit.ExitCode
		out.WorkerExitCode = &code
	}
	if a.failure != nil {
		out.Status = messages.StatusFailed
		if a.cancelled {
			out.Status = messages.StatusCancelled
		}
		out.Code = string(failureCode(a.failure))
		out.Message = a.failure.Error()
		out.Phase = a.failedPhase()
	}
	return out
}

// failedPhase is the phase the attempt was in when it failed (the teardown
// phase itself is not interesting).
func (a *attemptActor) failedPhase() string {
	switch {
	case a.result != "":
		return messages.PhasePublishing
	case a.workerExit != nil:
		return messages.PhaseCollecting
	case a.containerID != "" || a.worker != nil:
		return messages.PhaseRunning
	case a.imageID != "":
		return messages.PhaseProvisioning
	case a.prepared != nil:
		return messages.PhaseBuilding
	default:
		return messages.PhasePreparing
	}
}

func (a *attemptActor) inspect(ctx actor.Context) messages.InspectReply {
	facts := map[string]string{
		"attemptId":   a.d.AttemptID(),
		"branch":      a.d.Lease.WorktreeKey,
		"expiresAt":   a.d.Lease.ExpiresAt.Format(time.RFC3339),
		"inflight":    a.inflight,
		"image":       a.imageID,
		"container":   a.containerID,
		"network":     a.network,
		"tearingDown": strconv.FormatBool(a.tearingDown),
	}
	if a.failure != nil {
		facts["failure"] = string(failureCode(a.failure))
	}
	var children []string
	for _, pid := range ctx.Children() {
		children = append(children, pid.GetId())
	}
	return messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindAttempt, Phase: a.phase, Facts: facts, Children: children}
}
