package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/host/preflight"
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
func (m *Member) place(ctx context.Context, d *messages.Dispatch) (*fleetpb.MemberState, *failure.Error) {
	return choose(m.Directory(ctx), m.cfg.Name, d)
}

// choose picks, from a directory, the member with the most room for d,
// which reserves need there (messages.RequestedResources.Reservation, the
// reservation the member's own admission holds it to).
//
// Candidates: the members that answered, pass preflight, are not draining,
// serve the dispatch's repository (serves: its roots hold repo.localPath,
// or it fetches repo.remote's protocol), have a free slot and no attempt
// waiting in their queue (FIFO: a new one would wait behind it) and, when
// their budget is known, whose headroom
// (what one more attempt may reserve there now, messages.Snapshot.Headroom)
// holds need: exactly what the member's supervisor would start at once,
// so the fleet never places what the member would queue or refuse.
//
// Score: the member's room, the number of further dispatches of the same
// size it could still take after this one, by its tightest resource:
// min(free slots − 1, (memory headroom − need) / need, (CPU headroom −
// need) / need), memory and CPU counted only where the budget is known.
// Most room first; ties: the most free slots, then a member already
// holding repo.remote's mirror (holdsMirror), then the lowest runner id,
// so that the choice is deterministic. None: capacity_exhausted, saying
// which resource was short on how many members.
func choose(dir []*fleetpb.MemberState, fleetName string, d *messages.Dispatch) (*fleetpb.MemberState, *failure.Error) {
	need := d.Sandbox.RequestedResources.Reservation()
	var fit []*fleetpb.MemberState
	var short shortfall
	for _, st := range dir {
		if why := short.excludes(st, need, d.Repo); why == "" {
			fit = append(fit, st)
		}
	}
	if len(fit) == 0 {
		return nil, failure.New(failure.CapacityExhausted, "no member of fleet %q can take the dispatch now (it reserves %s of memory and %d CPU millis): %s; retry later",
			fleetName, preflight.FormatBytes(need.MemoryBytes), need.CPUMillis, short.String(len(dir)))
	}
	sort.Slice(fit, func(i, j int) bool {
		ri, rj := room(fit[i], need), room(fit[j], need)
		if ri != rj {
			return ri > rj
		}
		if fit[i].GetFreeSlots() != fit[j].GetFreeSlots() {
			return fit[i].GetFreeSlots() > fit[j].GetFreeSlots()
		}
		if a, b := holdsMirror(fit[i], d.Repo), holdsMirror(fit[j], d.Repo); a != b {
			return a
		}
		return fit[i].GetRunnerId() < fit[j].GetRunnerId()
	})
	return fit[0], nil
}

// headroomOf is a member's published headroom; ok is false when its
// budget is unknown.
func headroomOf(st *fleetpb.MemberState) (h messages.Reservation, ok bool) {
	if !st.GetHeadroomKnown() {
		return messages.Reservation{}, false
	}
	return messages.Reservation{MemoryBytes: st.GetHeadroomMemoryBytes(), CPUMillis: st.GetHeadroomCpuMillis()}, true
}

// room is how many more dispatches reserving need a candidate could take
// after this one (see choose).
func room(st *fleetpb.MemberState, need messages.Reservation) int64 {
	r := int64(st.GetFreeSlots()) - 1
	if h, ok := headroomOf(st); ok {
		if need.MemoryBytes > 0 {
			r = min(r, (h.MemoryBytes-need.MemoryBytes)/need.MemoryBytes)
		}
		if need.CPUMillis > 0 {
			r = min(r, (h.CPUMillis-need.CPUMillis)/need.CPUMillis)
		}
	}
	return r
}

// shortfall counts why members were not candidates, for the refusal.
type shortfall struct {
	unreachable, preflight, draining, repository, slots, queued, memory, cpu int
	// mostMemory and mostCPU are the largest headroom among the members
	// short of memory or CPU.
	mostMemory, mostCPU int64
}

// excludes records and returns why st is not a candidate for need on repo
// ("" if it is one).
func (s *shortfall) excludes(st *fleetpb.MemberState, need messages.Reservation, repo messages.RepoRef) string {
	switch {
	case st.GetError() != "":
		s.unreachable++
		return "unreachable"
	case st.GetDraining():
		s.draining++
		return "draining"
	case !st.GetPreflightAvailable() || st.GetDiskLow():
		s.preflight++
		return "preflight"
	case !serves(st, repo):
		s.repository++
		return "repository"
	case st.GetFreeSlots() <= 0:
		s.slots++
		return "slots"
	case st.GetQueued() > 0:
		// Its queue is FIFO: a new dispatch would wait behind the head,
		// which its budget does not hold now.
		s.queued++
		return "queued"
	}
	h, known := headroomOf(st)
	if !known || h.Holds(need) {
		return ""
	}
	why := ""
	if h.MemoryBytes < need.MemoryBytes {
		s.memory++
		s.mostMemory = max(s.mostMemory, h.MemoryBytes)
		why = "memory"
	}
	if h.CPUMillis < need.CPUMillis {
		s.cpu++
		s.mostCPU = max(s.mostCPU, h.CPUMillis)
		why += "cpu"
	}
	return why
}

// String says what was short, on how many of the members listed.
func (s shortfall) String(listed int) string {
	if listed == 0 {
		return "the fleet lists no member"
	}
	var parts []string
	if s.memory > 0 {
		parts = append(parts, fmt.Sprintf("memory short on %d (the most free: %s)", s.memory, preflight.FormatBytes(max(s.mostMemory, 0))))
	}
	if s.cpu > 0 {
		parts = append(parts, fmt.Sprintf("CPU short on %d (the most free: %d millis)", s.cpu, max(s.mostCPU, 0)))
	}
	if s.repository > 0 {
		parts = append(parts, fmt.Sprintf("%d not serving the repository (its roots or remote protocols)", s.repository))
	}
	if s.slots > 0 {
		parts = append(parts, fmt.Sprintf("no free slot on %d", s.slots))
	}
	if s.queued > 0 {
		parts = append(parts, fmt.Sprintf("attempts waiting in the queue on %d", s.queued))
	}
	if s.draining > 0 {
		parts = append(parts, fmt.Sprintf("%d draining", s.draining))
	}
	if s.preflight > 0 {
		parts = append(parts, fmt.Sprintf("%d failing preflight (disk, memory or CPU low)", s.preflight))
	}
	if s.unreachable > 0 {
		parts = append(parts, fmt.Sprintf("%d not answering", s.unreachable))
	}
	return fmt.Sprintf("of %d members, %s", listed, strings.Join(parts, ", "))
}

// placementRefused is the refusal of a dispatch that leaves its member to
// the fleet on a member without fleet placement.
func (m *Member) placementRefused() string {
	return fmt.Sprintf("execution.runnerId %s leaves the member to the fleet, and fleet placement is off on this member (--fleet-placement); name a member's runner id (`forged fleet` lists them)", AnyMember)
}
