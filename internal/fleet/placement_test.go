package fleet_test

import (
	"strings"
	"testing"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// entry is a directory entry that answers and passes preflight, with free
// slots and a known headroom.
func entry(id string, free int32, memory, cpu int64) *fleetpb.MemberState {
	return &fleetpb.MemberState{RunnerId: id, FreeSlots: free, PreflightAvailable: true,
		HeadroomKnown: true, HeadroomMemoryBytes: memory, HeadroomCpuMillis: cpu}
}

// unbudgeted is such an entry whose budget is unknown (no preflight
// figures): only its slots bound it.
func unbudgeted(id string, free int32) *fleetpb.MemberState {
	return &fleetpb.MemberState{RunnerId: id, FreeSlots: free, PreflightAvailable: true}
}

// reserving is a dispatch whose Reservation is need (only its requested
// resources matter to choose).
func reserving(need messages.Reservation) *messages.Dispatch {
	d := &messages.Dispatch{}
	d.Sandbox.RequestedResources = messages.RequestedResources{WorkerMemoryLimitBytes: need.MemoryBytes, CPUMillis: need.CPUMillis}
	return d
}

// TestChooseWeighsTheRequestedResources: a member whose headroom cannot
// hold the dispatch's reservation is no candidate, whatever its free
// slots; among the others the most room (further dispatches of the same
// size it could take after this one, by its tightest resource) wins, then
// the most free slots, then the lowest runner id; with none, the refusal
// names the resource that was short.
func TestChooseWeighsTheRequestedResources(t *testing.T) {
	big := messages.Reservation{MemoryBytes: 4 * gib, CPUMillis: 2000}
	cases := []struct {
		name    string
		need    messages.Reservation
		dir     []*fleetpb.MemberState
		want    string   // the runner chosen, or "" for a refusal
		refusal []string // what the refusal says
	}{
		{"memory short: the member with fewer slots but the memory",
			big, []*fleetpb.MemberState{entry("a", 6, 3*gib, 8000), entry("b", 1, 5*gib, 8000)}, "b", nil},
		{"CPU short: the member with the CPU",
			big, []*fleetpb.MemberState{entry("a", 6, 64*gib, 1999), entry("b", 1, 5*gib, 2000)}, "b", nil},
		{"an exact fit is a fit (the supervisor's Holds)",
			big, []*fleetpb.MemberState{entry("a", 1, 4*gib, 2000)}, "a", nil},
		{"the tightest resource decides: a has slots and CPU for 4 more but memory for 1; b room 2",
			small, []*fleetpb.MemberState{entry("a", 5, 2*gib, 5000), entry("b", 3, 8*gib, 3000)}, "b", nil},
		{"room ties: more free slots",
			small, []*fleetpb.MemberState{entry("a", 2, 2*gib, 9000), entry("b", 4, 2*gib, 9000)}, "b", nil},
		{"room and slots tie: the lowest runner id",
			small, []*fleetpb.MemberState{entry("b", 2, 2*gib, 9000), entry("a", 2, 2*gib, 9000)}, "a", nil},
		{"an unknown budget is bounded by its slots only",
			big, []*fleetpb.MemberState{unbudgeted("a", 3), entry("b", 8, 4*gib, 2000)}, "a", nil},
		{"a negative headroom (re-adoptions over the budget) fits nothing",
			small, []*fleetpb.MemberState{entry("a", 4, -gib, -500)}, "", []string{"memory short on 1 (the most free: 0 B)", "CPU short on 1 (the most free: 0 millis)"}},
		{"no member fits: memory named with the most free",
			big, []*fleetpb.MemberState{entry("a", 6, 3*gib, 8000), entry("b", 2, 2*gib, 8000), entry("c", 0, 64*gib, 8000)}, "",
			[]string{"reserves 4.0 GiB of memory and 2000 CPU millis", "memory short on 2 (the most free: 3.0 GiB)", "no free slot on 1", "of 3 members"}},
		{"no member fits: CPU named",
			big, []*fleetpb.MemberState{entry("a", 6, 8*gib, 1500)}, "", []string{"CPU short on 1 (the most free: 1500 millis)"}},
		{"a low disk is no candidate even if preflight still passes",
			small, []*fleetpb.MemberState{{RunnerId: "a", FreeSlots: 4, PreflightAvailable: true, DiskLow: true}}, "", []string{"1 failing preflight"}},
		{"a member with a queue is no candidate (FIFO: the new one would wait)",
			small, []*fleetpb.MemberState{{RunnerId: "a", FreeSlots: 3, Queued: 1, PreflightAvailable: true}, entry("b", 1, 2*gib, 1000)}, "b", nil},
		{"only queues: refused, saying so",
			small, []*fleetpb.MemberState{{RunnerId: "a", FreeSlots: 3, Queued: 1, PreflightAvailable: true}}, "", []string{"attempts waiting in the queue on 1"}},
		{"an empty fleet", small, nil, "", []string{"lists no member"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, refused := fleet.Choose(c.dir, "f", reserving(c.need))
			if c.want != "" {
				if refused != nil || st.GetRunnerId() != c.want {
					t.Fatalf("chose %v (refused %v); want %s", st.GetRunnerId(), refused, c.want)
				}
				return
			}
			if refused == nil || refused.Code != failure.CapacityExhausted {
				t.Fatalf("chose %v, refused %v; want %s", st.GetRunnerId(), refused, failure.CapacityExhausted)
			}
			for _, want := range c.refusal {
				if !strings.Contains(refused.Message, want) {
					t.Errorf("refusal %q does not say %q", refused.Message, want)
				}
			}
		})
	}
}

// TestChooseCountsEveryReservedByte: a dispatch's services and runtime
// overhead count against a member's headroom beside its worker, as the
// member's admission counts them (the same Reservation): 1 GiB worker +
// 1 GiB services + 512 MiB overhead does not fit 2 GiB.
func TestChooseCountsEveryReservedByte(t *testing.T) {
	d := &messages.Dispatch{}
	d.Sandbox.RequestedResources = messages.RequestedResources{WorkerMemoryLimitBytes: gib, ServiceMemoryLimitBytes: gib,
		RuntimeOverheadBytes: gib / 2, CPUMillis: 500}
	dir := []*fleetpb.MemberState{entry("a", 4, 2*gib, 4000), entry("b", 1, 5*gib/2, 500)}
	if st, refused := fleet.Choose(dir, "f", d); refused != nil || st.GetRunnerId() != "b" {
		t.Fatalf("chose %v (refused %v); want b, the only one with 2.5 GiB", st.GetRunnerId(), refused)
	}
	_, refused := fleet.Choose(dir[:1], "f", d)
	if refused == nil || !strings.Contains(refused.Message, "reserves 2.5 GiB of memory") {
		t.Fatalf("refusal %v; want one naming the 2.5 GiB reserved", refused)
	}
}

// TestChooseSpreadsABurstByMemory: dispatches of 2 GiB over members with
// headroom for 1, 3 and 4 of them (and slots to spare), each placement
// taking its reservation from the member chosen, as its supervisor would:
// eight fill every member's memory and no more; the ninth is refused,
// naming memory.
func TestChooseSpreadsABurstByMemory(t *testing.T) {
	need := messages.Reservation{MemoryBytes: 2 * gib, CPUMillis: 500}
	dir := []*fleetpb.MemberState{entry("a", 10, 2*gib, 8000), entry("b", 10, 6*gib, 8000), entry("c", 10, 9*gib, 8000)}
	got := map[string]int{}
	for i := range 8 {
		st, refused := fleet.Choose(dir, "f", reserving(need))
		if refused != nil {
			t.Fatalf("placement %d refused: %v (so far %v)", i, refused, got)
		}
		got[st.GetRunnerId()]++
		st.FreeSlots--
		st.HeadroomMemoryBytes -= need.MemoryBytes
		st.HeadroomCpuMillis -= need.CPUMillis
	}
	if got["a"] != 1 || got["b"] != 3 || got["c"] != 4 {
		t.Fatalf("placements by member = %v; want a 1, b 3, c 4", got)
	}
	_, refused := fleet.Choose(dir, "f", reserving(need))
	if refused == nil || refused.Code != failure.CapacityExhausted || !strings.Contains(refused.Message, "memory short on 3") {
		t.Fatalf("the ninth = %v; want %s naming memory on the 3 members", refused, failure.CapacityExhausted)
	}
}

// TestAMemberRefusesADispatchChosenAgainstAnotherInstance: a forwarded
// dispatch that names the runner instance the submitter chose is refused,
// nothing admitted, by a member that is another instance (it restarted);
// the same dispatch naming its instance, or none (a client's forward by
// runner id through an older member), is admitted.
func TestAMemberRefusesADispatchChosenAgainstAnotherInstance(t *testing.T) {
	local := newFakeRunner(2)
	id, raw := dispatchFor(t, local.RunnerID())
	resp := fleet.SubmitHere(local, &fleetpb.SubmitRequest{DispatchJson: raw, RunnerInstanceId: "a-previous-instance"})
	if resp.GetAccepted() || resp.GetCode() != string(failure.FleetMemberRestarted) || resp.GetAttemptId() != id ||
		!strings.Contains(resp.GetMessage(), "a-previous-instance") {
		t.Fatalf("another instance's dispatch: %v; want %s", resp, failure.FleetMemberRestarted)
	}
	if submitted, _ := local.seen(); len(submitted) != 0 {
		t.Fatalf("the runner saw %v; want nothing admitted", submitted)
	}
	resp = fleet.SubmitHere(local, &fleetpb.SubmitRequest{DispatchJson: raw, RunnerInstanceId: local.RunnerInstanceID()})
	if !resp.GetAccepted() {
		t.Fatalf("this instance's dispatch: %v", resp)
	}
	_, raw2 := dispatchFor(t, local.RunnerID())
	if resp := fleet.SubmitHere(local, &fleetpb.SubmitRequest{DispatchJson: raw2}); !resp.GetAccepted() {
		t.Fatalf("a dispatch naming no instance: %v", resp)
	}
	if submitted, _ := local.seen(); len(submitted) != 2 {
		t.Fatalf("the runner saw %v; want the two admitted", submitted)
	}
}
