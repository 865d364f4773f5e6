package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// Proxy timings: how long a member holds an events request with nothing
// new (the long poll), and how long the submitter waits before asking again
// after a request failed while the member is still listed.
const (
	eventsHold  = 2 * time.Second
	eventsRetry = 500 * time.Millisecond
)

// claimedWait bounds the submitter's wait for a member that claimed its
// attempt (it was moving the attempt's branch) and then left the member
// list: once it has been unlisted for claimedWait with no answer from its
// address about the attempt, the submitter ends the attempt with
// sandbox_runner_lost. It is the fleet's loss bound, 10 s: the membership
// TTL (cutOffAfter) plus one long poll (eventsHold) and one request
// (DefaultRequestTimeout), the time within which a live member that is
// listed would have answered.
const claimedWait = cutOffAfter + eventsHold + DefaultRequestTimeout

// claimedSilence measures how long a member that claimed its attempt has
// been gone: unlisted, and not answering for the attempt from its address
// (a restarted member on the same address answers from its own logs, and
// so resets the measure).
type claimedSilence struct{ since time.Time }

// gone records that the member is unlisted at now and reports whether it
// has been so, unheard, for claimedWait or more.
func (c *claimedSilence) gone(now time.Time) bool {
	if c.since.IsZero() {
		c.since = now
	}
	return now.Sub(c.since) >= claimedWait
}

// heard records an answer about the attempt from the member's address.
func (c *claimedSilence) heard() { c.since = time.Time{} }

// wait is how long the next request may wait for an answer: full
// (eventsHold plus a request) while the member is heard, else no longer
// than what is left of claimedWait, so that the bound holds.
func (c *claimedSilence) wait(now time.Time, full time.Duration) time.Duration {
	if c.since.IsZero() {
		return full
	}
	return max(min(full, claimedWait-now.Sub(c.since)), time.Millisecond)
}

// eventsHere answers an events request from this member's runner logs,
// holding it up to eventsHold while there is nothing new.
func (m *Member) eventsHere(ctx context.Context, req *fleetpb.EventsRequest) *fleetpb.EventsResponse {
	log, ok := m.local.Logs().Get(req.GetAttemptId())
	if !ok {
		return &fleetpb.EventsResponse{}
	}
	from := int(req.GetFrom())
	events, outcome, next, changed := log.Read(from)
	if len(events) == 0 && outcome == nil {
		select {
		case <-changed:
		case <-time.After(eventsHold):
		case <-ctx.Done():
		}
		events, outcome, next, _ = log.Read(from)
	}
	resp := &fleetpb.EventsResponse{Known: true, Next: int64(next)}
	for _, ev := range events {
		raw, err := json.Marshal(ev)
		if err != nil {
			continue // an event that does not encode is not one the runner made
		}
		resp.EventsJson = append(resp.EventsJson, raw)
	}
	if outcome != nil {
		resp.OutcomeJson, _ = json.Marshal(outcome)
	}
	return resp
}

// follow copies a forwarded attempt's events and outcome from the member
// running it into this member's log, so that a client reads it through the
// one socket it submitted to. It ends at the outcome, when this member
// leaves, or when the running member leaves the cluster's member list (its
// etcd lease expired): the attempt then ends, here, with
// sandbox_runner_lost. A failed request alone is not the loss signal: while
// the member is listed, follow asks again. A member that claimed the
// attempt before it left is waited for, at most claimedWait without an
// answer (claimedSilence).
func (m *Member) follow(log *runner.Log, attemptID string, target *fleetpb.MemberState) {
	defer m.followers.Done()
	from := int64(0)
	var silence claimedSilence
	var away time.Time // when the target was first seen unlisted
	for {
		if m.stopping.Load() {
			return
		}
		if !m.topology.contains(target.GetMemberId()) {
			if away.IsZero() {
				away = m.clock()
			}
			// A member that returns within the grace (its daemon
			// restarted on the same state root and re-adopted the
			// attempt) is followed on: it is the same runner, listed
			// under a new cluster member id.
			if back := m.returned(target, attemptID, from); back != nil {
				m.logger.Info("a forwarded attempt's member returned: following it on", "attempt", attemptID, "runner", target.GetRunnerId(), "address", back.GetAddress())
				target, away = back, time.Time{}
				continue
			}
			if m.clock().Sub(away) < m.cfg.ReturnGrace {
				time.Sleep(eventsRetry)
				continue
			}
			// The loss is recorded in etcd before the attempt ends here, so
			// that the member, should it return, finds it and fences the
			// attempt; a member that claimed it first is waited for.
			lost, err := m.declareLost(attemptID, target.GetRunnerId())
			if err != nil {
				m.logger.Warn("the loss of a forwarded attempt could not be recorded in etcd yet", "attempt", attemptID, "err", err)
				time.Sleep(eventsRetry)
				continue
			}
			if lost {
				log.Finish(messages.AttemptOutcome{AttemptID: attemptID, Status: messages.StatusFailed, Code: string(failure.SandboxRunnerLost),
					Message: fmt.Sprintf("fleet member %s (runner %s) left the fleet while the attempt ran; what it left is reaped by its own reaper when it returns",
						target.GetAddress(), target.GetRunnerId())})
				m.logger.Warn("a forwarded attempt's member was lost", "attempt", attemptID, "runner", target.GetRunnerId())
				return
			}
			// Claimed by its member before it left: its result may be
			// moving a branch; its outcome comes if it returns (a member
			// restarted on the same address answers from its logs), but
			// not forever.
			if silence.gone(m.clock()) {
				log.Finish(messages.AttemptOutcome{AttemptID: attemptID, Status: messages.StatusFailed, Code: string(failure.SandboxRunnerLost),
					Message: fmt.Sprintf("fleet member %s (runner %s) left the fleet after it claimed the attempt to import or publish its result, and did not answer for %s; its branch may have moved: read it before dispatching again",
						target.GetAddress(), target.GetRunnerId(), claimedWait)})
				m.logger.Warn("a forwarded attempt's member claimed it and was lost", "attempt", attemptID, "runner", target.GetRunnerId())
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), silence.wait(m.clock(), eventsHold+m.cfg.RequestTimeout))
		res, err := m.request(ctx, target.GetAddress(), &fleetpb.EventsRequest{AttemptId: attemptID, From: from})
		cancel()
		resp, ok := res.(*fleetpb.EventsResponse)
		if err != nil || !ok || !resp.GetKnown() {
			time.Sleep(eventsRetry)
			continue
		}
		silence.heard()
		for _, raw := range resp.GetEventsJson() {
			var ev messages.Event
			if json.Unmarshal(raw, &ev) == nil {
				log.Append(ev)
			}
		}
		from = resp.GetNext()
		if len(resp.GetOutcomeJson()) > 0 {
			var out messages.AttemptOutcome
			if err := json.Unmarshal(resp.GetOutcomeJson(), &out); err != nil || out.AttemptID != attemptID {
				out = messages.AttemptOutcome{AttemptID: attemptID, Status: messages.StatusFailed, Code: string(failure.SandboxRuntimeFailed),
					Message: "the running member's outcome could not be read"}
			}
			log.Finish(out)
			return
		}
	}
}

// returned looks for the runner that ran a forwarded attempt listed again
// under another cluster member id (a new process of the same daemon), and
// returns its state if it answers for the attempt (it re-adopted it, so
// its log holds the attempt's events by sequence number); nil otherwise.
func (m *Member) returned(target *fleetpb.MemberState, attemptID string, from int64) *fleetpb.MemberState {
	if m.cfg.ReturnGrace <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RequestTimeout)
	defer cancel()
	st, err := m.Lookup(ctx, target.GetRunnerId())
	if err != nil || st.GetMemberId() == target.GetMemberId() {
		return nil
	}
	res, err := m.request(ctx, st.GetAddress(), &fleetpb.EventsRequest{AttemptId: attemptID, From: from})
	if resp, ok := res.(*fleetpb.EventsResponse); err != nil || !ok || !resp.GetKnown() {
		return nil
	}
	return st
}
