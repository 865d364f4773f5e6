package fleet

import (
	"context"
	"fmt"
	"sort"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// AnyMember is the execution.runnerId by which a dispatch leaves its
// member to the fleet: the nil UUID, which no runner has (runner ids are
// random version 4 UUIDs). It is honoured only by a member whose operator
// enabled fleet placement (--fleet-placement); any other member refuses it
// with dispatch_runner_mismatch, as a runner id no member has.
const AnyMember = "00000000-0000-0000-0000-000000000000"

// place chooses the member for a dispatch left to the fleet from the
// directory as it is now (see choose).
func (m *Member) place(ctx context.Context, repo messages.RepoRef) (*fleetpb.MemberState, *failure.Error) {
	return choose(m.Directory(ctx), m.cfg.Name, repo)
}

// choose picks, from a directory, the member with the most free slots
// among those that answered, pass preflight, are not draining and serve
// the dispatch's repository (serves; ties: a member already holding the
// remote's mirror, then the lowest runner id, so the choice is
// deterministic). None: capacity_exhausted, naming the fleet.
func choose(dir []*fleetpb.MemberState, fleetName string, repo messages.RepoRef) (*fleetpb.MemberState, *failure.Error) {
	var fit []*fleetpb.MemberState
	for _, st := range dir {
		if st.GetError() == "" && st.GetPreflightAvailable() && !st.GetDraining() && st.GetFreeSlots() > 0 && serves(st, repo) {
			fit = append(fit, st)
		}
	}
	if len(fit) == 0 {
		return nil, failure.New(failure.CapacityExhausted, "no member of fleet %q has a free slot (or every member is draining or fails preflight); retry later", fleetName)
	}
	sort.Slice(fit, func(i, j int) bool {
		if fit[i].GetFreeSlots() != fit[j].GetFreeSlots() {
			return fit[i].GetFreeSlots() > fit[j].GetFreeSlots()
		}
		if a, b := holdsMirror(fit[i], repo), holdsMirror(fit[j], repo); a != b {
			return a
		}
		return fit[i].GetRunnerId() < fit[j].GetRunnerId()
	})
	return fit[0], nil
}

// placementRefused is the refusal of a dispatch that leaves its member to
// the fleet on a member without fleet placement.
func (m *Member) placementRefused() string {
	return fmt.Sprintf("execution.runnerId %s leaves the member to the fleet, and fleet placement is off on this member (--fleet-placement); name a member's runner id (`forged fleet` lists them)", AnyMember)
}
