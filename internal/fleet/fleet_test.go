package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/testkit/testimages"
	"github.com/forgedev/forged/messages"
)

// The tests in this package that need a running cluster start `forged
// daemon` processes (daemons_integration_test.go); the ones here test the
// fleet's logic in this process, without a cluster, under -race.

func TestMain(m *testing.M) { testimages.Main(m, testProject) }

// testProject names the repository of this package's real-engine
// dispatches, so that the images their attempts build are removed at the
// end (testimages.Main).
var testProject = testimages.Project("fleet")

// small is a dispatch's reservation in the tests of choose: 1 GiB and
// 1000 CPU millis.
var small = messages.Reservation{MemoryBytes: gib, CPUMillis: 1000}

const gib = int64(1) << 30

// TestChooseSpreadsABurstByFreeSlots: twelve placements over members of 2,
// 4 and 6 free slots (their budgets unknown: only slots bound them), each
// taking a slot of the member chosen, fill every member to its slots; the
// thirteenth is capacity_exhausted. A member that drains, fails preflight
// or did not answer is never chosen, however many slots it has free.
func TestChooseSpreadsABurstByFreeSlots(t *testing.T) {
	dir := []*fleetpb.MemberState{
		{RunnerId: "a", FreeSlots: 2, PreflightAvailable: true},
		{RunnerId: "b", FreeSlots: 4, PreflightAvailable: true},
		{RunnerId: "c", FreeSlots: 6, PreflightAvailable: true},
		{RunnerId: "draining", FreeSlots: 50, PreflightAvailable: true, Draining: true},
		{RunnerId: "preflight", FreeSlots: 50, PreflightAvailable: false, PreflightCode: "sandbox_disk_low"},
		{RunnerId: "unreachable", FreeSlots: 50, PreflightAvailable: true, Error: "timeout"},
	}
	got := map[string]int{}
	var order []string
	for i := range 12 {
		st, refused := fleet.Choose(dir, "f", reserving(small))
		if refused != nil {
			t.Fatalf("placement %d refused: %v", i, refused)
		}
		got[st.GetRunnerId()]++
		order = append(order, st.GetRunnerId())
		st.FreeSlots--
	}
	if got["a"] != 2 || got["b"] != 4 || got["c"] != 6 || len(got) != 3 {
		t.Fatalf("placements by member = %v (order %v); want a 2, b 4, c 6", got, order)
	}
	// Most free first, ties to the lowest runner id: c c b c b c ... a.
	if order[0] != "c" || order[1] != "c" || order[2] != "b" {
		t.Fatalf("order %v; want c, c, then b (4 free ties c's 4, b < c)", order)
	}
	_, refused := fleet.Choose(dir, "f", reserving(small))
	if refused == nil || refused.Code != failure.CapacityExhausted {
		t.Fatalf("the thirteenth = %v; want %s", refused, failure.CapacityExhausted)
	}
	for _, want := range []string{"no free slot on 3", "1 draining", "1 failing preflight", "1 not answering", "of 6 members"} {
		if !strings.Contains(refused.Message, want) {
			t.Errorf("refusal %q does not say %q", refused.Message, want)
		}
	}
	if _, refused := fleet.Choose(nil, "f", reserving(small)); refused == nil || refused.Code != failure.CapacityExhausted {
		t.Fatalf("an empty directory = %v; want %s", refused, failure.CapacityExhausted)
	}
}

// TestStateOfCountsFreeSlots: a member's entry counts as taken the slots
// that run, start or wait in its queue; it carries the preflight's verdict
// and capacity; a snapshot that failed gives an entry placement skips.
func TestStateOfCountsFreeSlots(t *testing.T) {
	snap := messages.Snapshot{Slots: 6, Active: 2, Starting: 1, Queued: 1, Attempts: []string{"x", "y"},
		Preflight: &messages.HostReport{Available: false, Code: "sandbox_disk_low", Reason: "disk low"}}
	snap.Preflight.Disk.Low = true
	snap.Preflight.Memory.AvailableBytes = 1 << 30
	snap.Headroom = &messages.Reservation{MemoryBytes: 3 * gib, CPUMillis: 1500}
	st := fleet.StateOf("r1", snap, nil, true)
	if !st.GetHeadroomKnown() || st.GetHeadroomMemoryBytes() != 3*gib || st.GetHeadroomCpuMillis() != 1500 {
		t.Fatalf("headroom not carried: %v", st)
	}
	if st.GetFreeSlots() != 2 || st.GetSlots() != 6 || st.GetActive() != 2 || st.GetStarting() != 1 || st.GetQueued() != 1 {
		t.Fatalf("counts %v; want 6 slots, 2 free", st)
	}
	if st.GetPreflightAvailable() || st.GetPreflightCode() != "sandbox_disk_low" || !st.GetDiskLow() || st.GetMemoryAvailableBytes() != 1<<30 || !st.GetDraining() {
		t.Fatalf("preflight and draining not carried: %v", st)
	}
	snap.Active, snap.Queued = 9, 9
	if st := fleet.StateOf("r1", snap, nil, false); st.GetFreeSlots() != 0 {
		t.Fatalf("an over-full member has %d free slots; want 0", st.GetFreeSlots())
	}
	broken := fleet.StateOf("r2", messages.Snapshot{Slots: 8}, errors.New("timeout"), false)
	if broken.GetError() == "" {
		t.Fatalf("a failed snapshot gave %v", broken)
	}
	snap.Preflight, snap.Headroom = nil, nil
	snap.Active, snap.Starting, snap.Queued = 0, 0, 0
	ok := fleet.StateOf("r3", snap, nil, false)
	if ok.GetHeadroomKnown() {
		t.Fatalf("a snapshot without headroom gave a known one: %v", ok)
	}
	if st, refused := fleet.Choose([]*fleetpb.MemberState{broken, ok}, "f", reserving(small)); refused != nil || st.GetRunnerId() != "r3" {
		t.Fatalf("chose %v, %v; want r3 (r2's snapshot failed)", st, refused)
	}
}

// TestDirectoryViewCarriesEachMember: the API's form of a directory keeps
// every member's capacity, attempts and state, and a member that did not
// answer as such.
func TestDirectoryViewCarriesEachMember(t *testing.T) {
	snap := messages.Snapshot{Slots: 2, Active: 1, Attempts: []string{"a1"}, Preflight: &messages.HostReport{Available: true}}
	busy := fleet.StateOf("r1", snap, nil, true)
	busy.Address, busy.MemberId, busy.CutOff = "127.0.0.1:7951", "f@1", true
	busy.RunnerInstanceId, busy.HeadroomKnown, busy.HeadroomMemoryBytes, busy.HeadroomCpuMillis = "i1", true, 3*gib, 1500
	gone := &fleetpb.MemberState{Address: "127.0.0.1:7952", MemberId: "f@2", Error: "timeout"}
	dir := fleet.DirectoryView("trial", "r1", []*fleetpb.MemberState{busy, gone})
	if !dir.Member || dir.Fleet != "trial" || dir.RunnerID != "r1" || len(dir.Members) != 2 {
		t.Fatalf("directory %+v", dir)
	}
	m := dir.Members[0]
	if m.RunnerID != "r1" || m.Address != busy.Address || m.MemberID != "f@1" || m.Slots != 2 || m.FreeSlots != 1 || m.Active != 1 ||
		len(m.Attempts) != 1 || m.Attempts[0] != "a1" || !m.Draining || !m.CutOff || !m.PreflightAvailable || m.UpdatedAt == nil || m.Error != "" {
		t.Fatalf("member %+v", m)
	}
	if m.RunnerInstanceID != "i1" || m.Headroom == nil || *m.Headroom != (messages.Reservation{MemoryBytes: 3 * gib, CPUMillis: 1500}) {
		t.Fatalf("member's instance and headroom %+v", m)
	}
	if g := dir.Members[1]; g.Error != "timeout" || g.Address != gone.Address || g.RunnerID != "" || g.Attempts == nil || g.UpdatedAt != nil || g.Headroom != nil {
		t.Fatalf("unanswered member %+v", g)
	}
}
