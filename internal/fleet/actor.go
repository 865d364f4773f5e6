package fleet

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/messages"
)

// fleetActor answers the other members on the cluster port: its state, the
// directory as this member sees it, and submissions and cancellations
// forwarded to this member's runner. Every call into the runner or across
// the cluster runs off the mailbox (actorkit.Go) and comes back as an
// answer to send.
type fleetActor struct {
	member *Member
	runCtx context.Context
	cancel context.CancelFunc
}

// answer is the result of off-mailbox work: the message to send to whom.
type answer struct {
	to  *actor.PID
	msg proto.Message
}

func (a *fleetActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.runCtx, a.cancel = context.WithCancel(context.Background())
	case *actor.Stopping:
		a.cancel()
	case *fleetpb.StateRequest:
		a.work(ctx, "fleet-state", func(context.Context) proto.Message { return a.member.State() })
	case *fleetpb.DirectoryRequest:
		a.work(ctx, "fleet-directory", func(c context.Context) proto.Message {
			return &fleetpb.DirectoryResponse{Members: a.member.Directory(c)}
		})
	case *fleetpb.SubmitRequest:
		a.work(ctx, "fleet-submit", func(context.Context) proto.Message { return a.member.submitHere(msg) })
	case *fleetpb.EventsRequest:
		a.work(ctx, "fleet-events", func(c context.Context) proto.Message { return a.member.eventsHere(c, msg) })
	case *fleetpb.CancelRequest:
		a.work(ctx, "fleet-cancel", func(context.Context) proto.Message {
			found, err := a.member.local.Cancel(msg.GetAttemptId(), msg.GetReason())
			if err != nil {
				return &fleetpb.CancelResponse{Error: err.Error()}
			}
			return &fleetpb.CancelResponse{Found: found}
		})
	case *fleetpb.InspectRequest:
		a.work(ctx, "fleet-inspect", func(context.Context) proto.Message { return a.member.inspectHere() })
	case *fleetpb.RenewRequest:
		a.work(ctx, "fleet-renew", func(context.Context) proto.Message { return a.member.renewHere(msg) })
	case answer:
		ctx.Send(msg.to, msg.msg)
	case actorkit.Panic:
		a.member.logger.Error("fleet request panicked; its requester times out", "step", msg.Step, "panic", msg.Value)
	}
}

// work runs fn off the mailbox and sends what it returns to the sender.
func (a *fleetActor) work(ctx actor.Context, step string, fn func(context.Context) proto.Message) {
	to := ctx.Sender()
	if to == nil {
		return // nobody to answer
	}
	actorkit.Go(ctx, a.runCtx, step, func(c context.Context) any { return answer{to: to, msg: fn(c)} })
}

// submitHere admits a dispatch forwarded by another member to this
// member's runner. The dispatch is read with the same strict decoder as the
// daemon's API, and it must name this member's runner id: a member never
// runs work meant for another. When the submitter names the runner
// instance it chose from the directory, this member must still be that
// process (its instance id is per process): one that restarted since
// refuses with fleet_member_restarted.
func (m *Member) submitHere(req *fleetpb.SubmitRequest) *fleetpb.SubmitResponse {
	runnerID := m.local.RunnerID()
	d, err := messages.DecodeDispatch(bytes.NewReader(req.GetDispatchJson()))
	if err != nil {
		return &fleetpb.SubmitResponse{Code: string(failure.CodeOf(err)), Message: err.Error(), RunnerId: runnerID}
	}
	if d.Execution.RunnerID != runnerID {
		return &fleetpb.SubmitResponse{AttemptId: d.AttemptID(), Code: string(failure.DispatchWrongRunner),
			Message: "the dispatch's execution.runnerId names another member; it was forwarded to the wrong one", RunnerId: runnerID}
	}
	if want := req.GetRunnerInstanceId(); want != "" && want != m.local.RunnerInstanceID() {
		return &fleetpb.SubmitResponse{AttemptId: d.AttemptID(), Code: string(failure.FleetMemberRestarted),
			Message: fmt.Sprintf("this member (runner %s) restarted after the submitter read the directory: it was chosen as runner instance %s, it is now %s; nothing was admitted, submit again",
				runnerID, want, m.local.RunnerInstanceID()), RunnerId: runnerID}
	}
	reply, err := m.local.Submit(d)
	if err != nil {
		m.logger.Warn("forwarded submission failed", "attempt", d.AttemptID(), "err", err)
		return &fleetpb.SubmitResponse{AttemptId: d.AttemptID(), Code: string(failure.SandboxRuntimeFailed), Message: err.Error(), RunnerId: runnerID}
	}
	m.logger.Info("admitted a forwarded dispatch", slog.String("attempt", reply.AttemptID), slog.Bool("accepted", reply.Accepted))
	return &fleetpb.SubmitResponse{AttemptId: reply.AttemptID, Accepted: reply.Accepted, Queued: reply.Queued,
		Code: reply.Code, Message: reply.Message, RunnerId: runnerID}
}
