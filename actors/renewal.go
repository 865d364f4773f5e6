package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/lease"
	"github.com/forgedev/forged/messages"
)

// leasePushTimeout bounds one push of a lease update into the worker.
const leasePushTimeout = 15 * time.Second

// leasePushStep names the lease push's async work (it is not a host step).
const leasePushStep = "lease push"

type leasePushed struct {
	expiresAt time.Time
	err       error
}

// onRenewLease extends the lease: the fence records it (the import's
// currency check and the watchdog read it), the watchdog re-arms, and a
// signed update goes to the running worker, which enforces its own copy of
// the lease.
func (a *attemptActor) onRenewLease(ctx actor.Context, msg messages.RenewLease) {
	reply := messages.RenewLeaseReply{AttemptID: a.d.AttemptID()}
	err := a.fence.renew(msg.FencingToken, msg.ExpiresAt)
	if err == nil && a.tearingDown {
		err = failure.New(failure.SandboxCancelled, "the attempt is tearing down")
	}
	if err != nil {
		reply.Code, reply.Message, reply.ExpiresAt = string(failure.CodeOf(err)), err.Error(), a.fence.expiry()
		ctx.Respond(reply)
		return
	}
	reply.Accepted, reply.ExpiresAt = true, msg.ExpiresAt
	ctx.Respond(reply)
	if a.watchdog != nil {
		ctx.Send(a.watchdog, leaseRenewed{})
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_lease_renewed", fmt.Sprintf("Lease renewed until %s.", msg.ExpiresAt.UTC().Format(time.RFC3339)), map[string]string{
		"expiresAt": msg.ExpiresAt.UTC().Format(time.RFC3339Nano),
	}))
	a.pushLease(ctx)
}

// pushLease sends the worker the current lease, one push at a time: a
// renewal that arrives during a push is sent when it completes, so an older
// update never overwrites a newer one in the worker.
func (a *attemptActor) pushLease(ctx actor.Context) {
	if !a.workerRunning || a.workerExit != nil || a.tearingDown {
		return // not started yet (onWorkerRunning catches up), or gone
	}
	if a.leasePushing {
		a.leasePending = true
		return
	}
	update, err := lease.Sign(a.d.AttemptID(), a.d.Lease.FencingToken, a.fence.expiry(), a.controlKey)
	if err != nil {
		a.emit(ctx, messages.RunnerEvent("sandbox_lease_push_failed", err.Error(), nil))
		return
	}
	raw, err := json.Marshal(update)
	if err != nil {
		a.emit(ctx, messages.RunnerEvent("sandbox_lease_push_failed", err.Error(), nil))
		return
	}
	a.leasePushing = true
	container, expiresAt := a.containerID, a.fence.expiry()
	runAsync(ctx, a.runCtx, leasePushStep, func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, leasePushTimeout)
		defer cancel()
		return leasePushed{expiresAt: expiresAt, err: a.deps.Docker.WriteLeaseUpdate(callCtx, container, raw)}
	})
}

func (a *attemptActor) onLeasePushed(ctx actor.Context, msg leasePushed) {
	a.leasePushing = false
	if msg.err != nil {
		// The host's watchdog still holds the renewed lease; the worker
		// will stop at its old deadline unless a later push lands.
		a.emit(ctx, messages.RunnerEvent("sandbox_lease_push_failed", fmt.Sprintf("Could not push the renewed lease into the worker: %v", msg.err), nil))
	}
	if a.leasePending {
		a.leasePending = false
		a.pushLease(ctx)
	}
}

// onWorkerRunning is called when the worker reports it started: a renewal
// that arrived after its start packet was built is pushed now.
func (a *attemptActor) onWorkerRunning(ctx actor.Context) {
	if a.workerRunning {
		return
	}
	a.workerRunning = true
	if a.fence.expiry().After(a.packetExpiry) {
		a.pushLease(ctx)
	}
}
