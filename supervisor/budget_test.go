package supervisor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/messages"
)

const gib = int64(1) << 30

// setHost makes the fake report a host of totalBytes (and as much
// available), keeping reserveBytes, with cpuMillis after its reserved cores.
func (f *fakeCapacity) setHost(totalBytes, reserveBytes, cpuMillis int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.report = preflight.Report{CheckedAt: time.Now(), Available: true, Capacity: 8,
		Engine: preflight.EngineFacts{MemTotalBytes: totalBytes},
		Memory: preflight.Memory{AvailableBytes: totalBytes, ReserveBytes: reserveBytes},
		CPU:    preflight.CPU{AvailableMillis: cpuMillis, ReservedCores: 1}}
}

func sized(memoryBytes, cpuMillis int64) *messages.Dispatch {
	d := dispatch()
	d.Sandbox.RequestedResources.WorkerMemoryLimitBytes = memoryBytes - d.Sandbox.RequestedResources.RuntimeOverheadBytes
	d.Sandbox.RequestedResources.CPUMillis = cpuMillis
	return d
}

func TestAdmissionHoldsEachDispatchsResourcesAgainstTheHost(t *testing.T) {
	source := &fakeCapacity{}
	source.setHost(8*gib, 2*gib, 3000) // 6 GiB and 3000 millis to share
	f := newCapacityFixture(t, source, 8)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 8 })
	probe := f.system.NewProbe()

	// More than the host offers, even alone: refused with the numbers.
	huge := sized(7*gib, 1000)
	reply := f.submit(t, huge, probe.PID())
	assert.False(t, reply.Accepted)
	assert.Equal(t, string(failure.DispatchExceedsHost), reply.Code)
	assert.Contains(t, reply.Message, "needs 7.0 GiB of memory")
	assert.Contains(t, reply.Message, "at most 6.0 GiB of memory after its reserve of 2.0 GiB")
	cpuHog := sized(gib, 4000)
	reply = f.submit(t, cpuHog, probe.PID())
	assert.Equal(t, string(failure.DispatchExceedsHost), reply.Code)
	assert.Contains(t, reply.Message, "4000 CPU millis")
	assert.Contains(t, reply.Message, "3000 CPU millis after its 1 reserved cores")

	// Two that fit only one at a time: the second waits for the first.
	first, second := sized(4*gib, 1000), sized(4*gib, 1000)
	assert.Equal(t, messages.SubmitReply{AttemptID: first.AttemptID(), Accepted: true}, f.submit(t, first, probe.PID()))
	assert.Equal(t, messages.SubmitReply{AttemptID: second.AttemptID(), Accepted: true, Queued: true}, f.submit(t, second, probe.PID()))
	// A small one that would fit beside the first still waits its turn.
	small := sized(gib, 500)
	assert.True(t, f.submit(t, small, probe.PID()).Queued, "FIFO: nobody overtakes a waiting attempt")
	require.Eventually(t, func() bool { s := f.snapshot(t); return s.Active == 1 && s.Queued == 2 }, within, 10*time.Millisecond)
	res, err := f.system.Root.RequestFuture(f.root, messages.Inspect{}, within).Result()
	require.NoError(t, err)
	facts := res.(messages.InspectReply).Facts
	assert.Equal(t, fmt.Sprint(4*gib), facts["heldMemoryBytes"], "the debug console shows what is held")
	assert.Equal(t, "1000", facts["heldCpuMillis"])
	assert.Equal(t, fmt.Sprint(6*gib), facts["budgetMemoryBytes"])
	// The snapshot publishes what is left for one more (a fleet places by
	// it): 6 GiB less the first's 4, and 3000 millis less its 1000.
	headroom := f.snapshot(t).Headroom
	require.NotNil(t, headroom)
	assert.Equal(t, messages.Reservation{MemoryBytes: 2 * gib, CPUMillis: 2000}, *headroom)
	assert.False(t, headroom.Holds(needOf(second)), "the queued second does not fit the headroom")

	f.system.Root.Send(f.attemptPID(t, first), finishNow{})
	require.Eventually(t, func() bool {
		s := f.snapshot(t)
		return s.Queued == 0 && len(s.Attempts) == 2
	}, within, 10*time.Millisecond)
	assert.ElementsMatch(t, []string{second.AttemptID(), small.AttemptID()}, f.snapshot(t).Attempts)

	// CPU is held too: 1000 + 500 taken of 3000, so 2000 more must wait.
	wide := sized(gib, 2000)
	assert.True(t, f.submit(t, wide, probe.PID()).Queued)
	f.system.Root.Send(f.attemptPID(t, small), finishNow{})
	require.Eventually(t, func() bool { return f.snapshot(t).Queued == 0 }, within, 10*time.Millisecond)
	assert.ElementsMatch(t, []string{second.AttemptID(), wide.AttemptID()}, f.snapshot(t).Attempts)
}

func TestAdmissionWaitsForAvailableMemory(t *testing.T) {
	source := &fakeCapacity{}
	source.setHost(8*gib, 2*gib, 3000)
	source.mu.Lock()
	source.report.Memory.AvailableBytes = 3 * gib // 1 GiB above the reserve, right now
	source.mu.Unlock()
	f := newCapacityFixture(t, source, 8)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 8 })
	d := sized(2*gib, 1000)
	assert.True(t, f.submit(t, d, nil).Queued, "fits the host, not its available memory now")

	source.setHost(8*gib, 2*gib, 3000)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Queued == 0 })
	assert.Equal(t, []string{d.AttemptID()}, f.snapshot(t).Attempts)
}

// TestHeadroomIsTheBudgetLessWhatIsHeld: the headroom is the memory budget
// less the held memory, capped by the memory available now less the
// reserve, and the CPU less the held CPU; fitsNow admits exactly what it
// holds, and an unknown budget bounds nothing (and publishes none).
func TestHeadroomIsTheBudgetLessWhatIsHeld(t *testing.T) {
	b := budgetOf(&preflight.Report{Engine: preflight.EngineFacts{MemTotalBytes: 16 * gib},
		Memory: preflight.Memory{AvailableBytes: 8 * gib, ReserveBytes: 2 * gib}, CPU: preflight.CPU{AvailableMillis: 4000}})
	cases := []struct {
		name string
		held need
		want messages.Reservation
	}{
		{"nothing held: capped by the available memory", need{}, messages.Reservation{MemoryBytes: 6 * gib, CPUMillis: 4000}},
		{"held below the cap", need{MemoryBytes: 9 * gib, CPUMillis: 1500}, messages.Reservation{MemoryBytes: 5 * gib, CPUMillis: 2500}},
		{"over-held (re-adoptions)", need{MemoryBytes: 15 * gib, CPUMillis: 5000}, messages.Reservation{MemoryBytes: -1 * gib, CPUMillis: -1000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := b.headroom(c.held)
			assert.Equal(t, c.want, h)
			exact := sized(max(h.MemoryBytes, gib), max(h.CPUMillis, 500))
			assert.Equal(t, h.MemoryBytes >= gib && h.CPUMillis >= 500, b.fitsNow(c.held, needOf(exact)), "fitsNow admits what the headroom holds")
			over := sized(max(h.MemoryBytes, gib)+1, max(h.CPUMillis, 500))
			assert.False(t, b.fitsNow(c.held, needOf(over)))
		})
	}
	assert.False(t, budgetOf(nil).known)
	assert.True(t, budgetOf(nil).fitsNow(need{MemoryBytes: 100 * gib}, need{MemoryBytes: 100 * gib}))
}
