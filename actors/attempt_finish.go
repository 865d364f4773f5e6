package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/teardown"
	"github.com/forgedev/forged/messages"
)

func (a *attemptActor) beginTeardown(ctx actor.Context) {
	a.tearingDown = true
	a.stopTimeLimits()
	a.collectPeak(ctx, func() { a.teardown(ctx) })
}

// teardown releases the attempt through the one teardown operation. It
// runs on a context detached from the attempt's cancellation; dockerops
// bounds every engine call and the whole teardown.
func (a *attemptActor) teardown(ctx actor.Context) {
	a.setPhase(ctx, messages.PhaseTearingDown)
	a.emit(ctx, messages.RunnerEvent("sandbox_teardown_started", fmt.Sprintf("Removing Docker resources for attempt %s.", a.d.AttemptID()),
		map[string]any{"runtimeLease": a.runtimeLease("releasing")}))
	in := teardownInput{docker: a.deps.Docker, ledger: a.ledger.writer,
		req:     teardown.Request{Owner: dockerops.OwnershipOf(a.d), Source: ledger.SourceTeardown},
		workDir: a.in.workDir, removeAll: a.cfg.removeAll}
	if a.ledger.written {
		e := a.ledgerEntry(a.ledger.state)
		in.req.Ledger = &e
	}
	a.inflight = "teardown"
	runAsync(ctx, context.WithoutCancel(a.runCtx), "teardown", func(base context.Context) any { return teardownStep(base, in) })
}

func (a *attemptActor) onTornDown(ctx actor.Context, msg teardownDone) {
	// The teardown's own ledger writes were the last: the writer has
	// nothing left to do.
	a.ledger.close()
	res := msg.result
	report := res.Report
	degraded := res.Degraded()
	if degraded {
		a.emit(ctx, messages.FailureEvent("teardown_failed", fmt.Sprintf("Docker resources for attempt %s require reaping: %v", a.d.AttemptID(), errors.Join(res.Err, res.LedgerErr)), report))
	} else {
		a.emit(ctx, messages.RunnerEvent("sandbox_teardown_completed", fmt.Sprintf("Removed Docker resources for attempt %s.", a.d.AttemptID()), report))
	}
	outcome := a.outcome(report, degraded)
	if outcome.Status != messages.StatusSucceeded {
		a.emit(ctx, messages.FailureEvent(outcome.Code, outcome.Message, map[string]string{"phase": outcome.Phase}))
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
		ResultCommitSHA:    a.verdict.result,
		ResultCommitCount:  a.verdict.imported.Commits,
		ResultCommits:      a.verdict.imported.Newest,
		PublishedCommitSHA: a.verdict.published,
		Isolation:          a.in.isolation,
		WorkerRuntime:      a.createdRuntime(),
		Telemetry:          a.worker.telemetry.Telemetry,
		Degraded:           degraded,
		Cleanup:            &report,
		FinishedAt:         a.cfg.Clock.Now().UTC(),
	}
	if a.verdict.imported.WorktreeLeft != "" {
		out.WorktreeLeft = &messages.WorktreeLeft{Path: a.verdict.imported.WorktreeLeft, Reason: a.verdict.imported.WorktreeLeftReason}
	}
	if a.worker.exit != nil && a.worker.exit.Err == nil {
		code := a.worker.exit.ExitCode
		out.WorkerExitCode = &code
	}
	if a.worker.telemetry.Telemetry != nil {
		out.PeakMemoryBytes = a.worker.telemetry.Telemetry.PeakMemoryBytes
	}
	if a.verdict.failure != nil {
		out.Status = messages.StatusFailed
		if a.verdict.cancelled {
			out.Status = messages.StatusCancelled
		}
		out.Code = string(failureCode(a.verdict.failure))
		out.Message = a.verdict.failure.Error()
		out.Phase = a.verdict.failedPhase
		out.Causes = a.verdict.causes
	}
	return out
}

func (a *attemptActor) inspect(ctx actor.Context) messages.InspectReply {
	facts := map[string]string{
		"attemptId":   a.d.AttemptID(),
		"branch":      a.d.Lease.WorktreeKey,
		"expiresAt":   a.d.Lease.ExpiresAt.Format(time.RFC3339),
		"inflight":    a.inflight,
		"image":       a.image.id,
		"container":   a.worker.containerID,
		"network":     cmp.Or(a.sidecars.network, "none"),
		"tearingDown": strconv.FormatBool(a.tearingDown),
		"sandboxUser": a.cfg.User.OrImage().String(), // its slot's uid:gid
	}
	if a.in.isolation != "" {
		facts["isolation"] = a.in.isolation
	}
	if rt := a.createdRuntime(); rt != "" {
		facts["workerRuntime"] = rt
	}
	if a.sidecars.egressNetworkID != "" {
		facts["egressNetwork"] = egressNetworkName(a.in.names)
	}
	if a.verdict.failure != nil {
		facts["failure"] = string(failureCode(a.verdict.failure))
		facts["failedPhase"] = a.verdict.failedPhase
	}
	var children []string
	for _, pid := range ctx.Children() {
		children = append(children, pid.GetId())
	}
	return messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindAttempt, Phase: a.phase, Facts: facts, Children: children}
}
