package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// Submit admits a dispatch submitted to this member: here when its
// execution.runnerId is this member's runner id, else on the member the
// directory maps that runner id to, through its fleet actor. raw is the
// dispatch's JSON document (the other member decodes it again with the
// same strict decoder). A runner id no member has is refused with
// dispatch_runner_mismatch, as on one host. AnyMember leaves the member to
// the fleet (with Config.Placement; see place).
func (m *Member) Submit(ctx context.Context, raw []byte) (messages.SubmitReply, string, error) {
	d, err := messages.DecodeDispatch(bytes.NewReader(raw))
	if err != nil {
		return messages.SubmitReply{Code: string(failure.CodeOf(err)), Message: err.Error()}, "", nil
	}
	target := d.Execution.RunnerID
	var st *fleetpb.MemberState
	if target == AnyMember {
		if !m.cfg.Placement {
			return messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.DispatchWrongRunner), Message: m.placementRefused()}, "", nil
		}
		chosen, refusal := m.place(ctx, d.Repo)
		if refusal != nil {
			return messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(refusal.Code), Message: refusal.Message}, "", nil
		}
		// The chosen member runs it as a dispatch naming it.
		st, target = chosen, chosen.GetRunnerId()
		d.Execution.RunnerID = target
		if raw, err = json.Marshal(d); err != nil {
			return messages.SubmitReply{}, "", fmt.Errorf("fleet: encode the placed dispatch: %w", err)
		}
	}
	if target == m.local.RunnerID() {
		reply, err := m.local.Submit(d)
		return reply, target, err
	}
	if st == nil {
		st, err = m.Lookup(ctx, target)
	}
	if errors.Is(err, ErrNoSuchMember) {
		return messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.DispatchWrongRunner),
			Message: fmt.Sprintf("execution.runnerId %s names no member of fleet %q; `forged fleet` lists the members' runner ids", target, m.cfg.Name)}, "", nil
	}
	if err != nil {
		return messages.SubmitReply{}, "", err
	}
	res, err := m.request(ctx, st.GetAddress(), &fleetpb.SubmitRequest{DispatchJson: raw})
	if err != nil {
		return messages.SubmitReply{}, target, fmt.Errorf("fleet: forward to %s (%s): %w", target, st.GetAddress(), err)
	}
	resp, ok := res.(*fleetpb.SubmitResponse)
	if !ok {
		return messages.SubmitReply{}, target, fmt.Errorf("fleet: forward to %s: unexpected answer %T", target, res)
	}
	reply := messages.SubmitReply{AttemptID: resp.GetAttemptId(), Accepted: resp.GetAccepted(), Queued: resp.GetQueued(),
		Code: resp.GetCode(), Message: resp.GetMessage()}
	if reply.Accepted {
		m.proxy(d.AttemptID(), st)
	}
	return reply, resp.GetRunnerId(), nil
}

// proxy starts copying a forwarded attempt's events into this member's log
// and remembers where it runs.
func (m *Member) proxy(attemptID string, target *fleetpb.MemberState) {
	m.forwardedMu.Lock()
	m.forwarded[attemptID] = target.GetRunnerId()
	m.forwardedMu.Unlock()
	log, ok := m.local.Logs().Open(attemptID)
	if !ok {
		m.logger.Warn("a forwarded attempt's id is already logged here; its events are not proxied", "attempt", attemptID)
		return
	}
	if m.stopping.Load() {
		return
	}
	m.followers.Add(1)
	go m.follow(log, attemptID, target)
}

// CancelAttempt cancels an attempt submitted through this member: on the
// member it was forwarded to, else here.
func (m *Member) CancelAttempt(ctx context.Context, attemptID, reason string) (bool, error) {
	runnerID, ok := m.forwardedTo(attemptID)
	if !ok {
		return m.local.Cancel(attemptID, reason)
	}
	return m.Cancel(ctx, runnerID, attemptID, reason)
}

// Cancel cancels an attempt on the member whose runner id is runnerID.
func (m *Member) Cancel(ctx context.Context, runnerID, attemptID, reason string) (bool, error) {
	if runnerID == m.local.RunnerID() {
		return m.local.Cancel(attemptID, reason)
	}
	resp, err := ask[*fleetpb.CancelResponse](ctx, m, "cancel", runnerID, &fleetpb.CancelRequest{AttemptId: attemptID, Reason: reason})
	if err != nil {
		return false, err
	}
	if resp.GetError() != "" {
		return false, fmt.Errorf("fleet: cancel on %s: %s", runnerID, resp.GetError())
	}
	return resp.GetFound(), nil
}

// forwardedTo is the runner id of the member an attempt submitted through
// this member was forwarded to.
func (m *Member) forwardedTo(attemptID string) (string, bool) {
	m.forwardedMu.Lock()
	defer m.forwardedMu.Unlock()
	runnerID, ok := m.forwarded[attemptID]
	return runnerID, ok
}

// ask sends req to the member whose runner id is runnerID and returns its
// answer as T: a lookup's error as it is, the others as
// "fleet: OP on RUNNER: …".
func ask[T proto.Message](ctx context.Context, m *Member, op, runnerID string, req proto.Message) (T, error) {
	var zero T
	st, err := m.Lookup(ctx, runnerID)
	if err != nil {
		return zero, err
	}
	res, err := m.request(ctx, st.GetAddress(), req)
	if err != nil {
		return zero, fmt.Errorf("fleet: %s on %s: %w", op, runnerID, err)
	}
	answer, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("fleet: %s on %s: unexpected answer %T", op, runnerID, res)
	}
	return answer, nil
}

// RenewAttempt renews the lease of an attempt submitted through this
// member: on the member it was forwarded to, else here. The fencing token
// is checked where the attempt runs, as on one host.
func (m *Member) RenewAttempt(ctx context.Context, attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	runnerID, ok := m.forwardedTo(attemptID)
	if !ok || runnerID == m.local.RunnerID() {
		return m.local.Renew(attemptID, fencingToken, expiresAt)
	}
	req := &fleetpb.RenewRequest{AttemptId: attemptID, FencingToken: fencingToken, ExpiresAtUnixNanos: expiresAt.UnixNano()}
	resp, err := ask[*fleetpb.RenewResponse](ctx, m, "renew", runnerID, req)
	if err != nil {
		return messages.RenewLeaseReply{}, err
	}
	if resp.GetError() != "" {
		return messages.RenewLeaseReply{}, fmt.Errorf("fleet: renew on %s: %s", runnerID, resp.GetError())
	}
	reply := messages.RenewLeaseReply{AttemptID: resp.GetAttemptId(), Accepted: resp.GetAccepted(), Code: resp.GetCode(), Message: resp.GetMessage()}
	if n := resp.GetExpiresAtUnixNanos(); n != 0 {
		reply.ExpiresAt = time.Unix(0, n).UTC()
	}
	return reply, nil
}

// renewHere renews a lease for another member's client on this member's
// runner.
func (m *Member) renewHere(req *fleetpb.RenewRequest) *fleetpb.RenewResponse {
	reply, err := m.local.Renew(req.GetAttemptId(), req.GetFencingToken(), time.Unix(0, req.GetExpiresAtUnixNanos()).UTC())
	if err != nil {
		return &fleetpb.RenewResponse{AttemptId: req.GetAttemptId(), Error: err.Error()}
	}
	resp := &fleetpb.RenewResponse{AttemptId: reply.AttemptID, Accepted: reply.Accepted, Code: reply.Code, Message: reply.Message}
	if !reply.ExpiresAt.IsZero() {
		resp.ExpiresAtUnixNanos = reply.ExpiresAt.UnixNano()
	}
	return resp
}
