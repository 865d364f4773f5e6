package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

// onRenewLease extends the lease: the fence records it (the import's
// currency check reads it at the moment of the move), the ledger is
// rewritten with it (ordered after every earlier write), the watchdog re-arms
// at the new expiry, and the lease pusher sends the running worker a signed
// update, since the worker enforces its own copy of the lease.
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
	a.worker.renewals++
	a.worker.renewedAt = a.cfg.Clock.Now()
	if a.ledger.written {
		// The ledger always holds the current expiry: the reaper judges a
		// dead process's attempt by it.
		a.writeLedger(a.ledger.state)
	}
	if a.watchdog != nil {
		ctx.Send(a.watchdog, leaseRenewed{expiresAt: msg.ExpiresAt})
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_lease_renewed", fmt.Sprintf("Lease renewed until %s.", msg.ExpiresAt.UTC().Format(time.RFC3339)), map[string]string{
		"expiresAt": msg.ExpiresAt.UTC().Format(time.RFC3339Nano),
	}))
	a.pushLease(ctx)
}

// pushLease hands the current lease, signed, to the lease pusher, which
// sends it into the worker one push at a time, newest last.
func (a *attemptActor) pushLease(ctx actor.Context) {
	if !a.worker.running || a.worker.exit != nil || a.tearingDown || a.pusher == nil {
		return // not started yet (onWorkerRunning catches up), or gone
	}
	update, err := lease.Sign(a.d.AttemptID(), a.d.Lease.FencingToken, a.fence.expiry(), a.worker.controlKey)
	if err != nil {
		a.emit(ctx, messages.FailureEvent("sandbox_lease_push_failed", err.Error(), nil))
		return
	}
	ctx.Send(a.pusher, pushLease{containerID: a.worker.containerID, update: update})
}

// onWorkerRunning is called when the worker reports it started: the lease
// pusher starts, and a renewal that arrived after the start packet was
// built is pushed now.
func (a *attemptActor) onWorkerRunning(ctx actor.Context) {
	if a.worker.running {
		return
	}
	a.worker.running = true
	a.pusher = a.children.spawn(ctx, newLeasePusherProps(a.deps.Docker), kindLeasePusher)
	if a.fence.expiry().After(a.worker.packetExpiry) {
		a.pushLease(ctx)
	}
}
