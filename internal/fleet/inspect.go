package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// inspectHere answers another member's InspectRequest with this member's
// live actor tree.
func (m *Member) inspectHere() *fleetpb.InspectResponse {
	runnerID := m.local.RunnerID()
	tree := m.local.Inspect()
	if tree == nil {
		tree = []messages.InspectReply{}
	}
	raw, err := json.Marshal(tree)
	if err != nil {
		return &fleetpb.InspectResponse{RunnerId: runnerID, Error: err.Error()}
	}
	return &fleetpb.InspectResponse{TreeJson: raw, RunnerId: runnerID}
}

// InspectMember is the live actor tree of the member whose runner id is
// runnerID, read through the cluster (this member's own, read here). A
// runner id no listed member has fails with fleet_member_unknown.
func (m *Member) InspectMember(ctx context.Context, runnerID string) ([]messages.InspectReply, error) {
	if runnerID == m.local.RunnerID() {
		return m.local.Inspect(), nil
	}
	st, err := m.Lookup(ctx, runnerID)
	if errors.Is(err, ErrNoSuchMember) {
		return nil, failure.Wrap(failure.FleetMemberUnknown, err, "no member of fleet %q has runner id %s", m.cfg.Name, runnerID)
	}
	if err != nil {
		return nil, err
	}
	res, err := m.request(ctx, st.GetAddress(), &fleetpb.InspectRequest{})
	if err != nil {
		return nil, fmt.Errorf("fleet: the member %s at %s did not answer: %w", runnerID, st.GetAddress(), err)
	}
	answer, ok := res.(*fleetpb.InspectResponse)
	switch {
	case !ok:
		return nil, fmt.Errorf("fleet: unexpected answer %T", res)
	case answer.GetError() != "":
		return nil, fmt.Errorf("fleet: the member %s: %s", runnerID, answer.GetError())
	case answer.GetRunnerId() != runnerID:
		return nil, fmt.Errorf("fleet: asked %s at %s, answered by %s", runnerID, st.GetAddress(), answer.GetRunnerId())
	}
	var tree []messages.InspectReply
	if err := json.Unmarshal(answer.GetTreeJson(), &tree); err != nil {
		return nil, fmt.Errorf("fleet: the member %s's tree: %w", runnerID, err)
	}
	return tree, nil
}

// InspectMember is the live actor tree of the member runnerID names, for
// the daemon's API (GET /v1/fleet/members/{runnerId}/inspect).
func (r Routed) InspectMember(ctx context.Context, runnerID string) ([]messages.InspectReply, error) {
	ctx, cancel := context.WithTimeout(ctx, directoryTimeout)
	defer cancel()
	return r.Member.InspectMember(ctx, runnerID)
}
