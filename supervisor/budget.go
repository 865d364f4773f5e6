package supervisor

import (
	"fmt"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/messages"
)

// need is what one admitted attempt holds against the host until it
// finishes: its dispatch's Reservation (requested worker + services +
// runtime overhead memory, and CPU millis). A fleet places by the same
// Reservation (internal/fleet).
type need = messages.Reservation

func needOf(d *messages.Dispatch) need {
	return d.Sandbox.RequestedResources.Reservation()
}

// budget is what the host offers attempts, from a preflight report:
//
//   - memory: the host's total memory (the engine's MemTotal) less the host
//     reserve; the running and starting attempts' requested memory is held
//     against it. Live memory pressure is the preflight's own concern: an
//     available memory less the reserve that holds not even the smallest
//     dispatch refuses everything with docker_memory_low, and a dispatch
//     also waits while the available memory less the reserve is below its
//     own need.
//   - CPU: the cores less the host's reserved cores, in millis; the
//     attempts' requested millis are held against it.
//
// A report without memory figures (a host that could not be measured, or a
// test's bare report) imposes no budget; the slot count still applies.
type budget struct {
	known          bool
	memoryBytes    int64 // total less reserve
	availableBytes int64 // available now less reserve
	reserveBytes   int64
	cpuMillis      int64
	reservedCores  int
}

func budgetOf(r *preflight.Report) budget {
	if r == nil || (r.Engine.MemTotalBytes <= 0 && r.Memory.AvailableBytes <= 0) {
		return budget{}
	}
	total := r.Engine.MemTotalBytes
	if total <= 0 {
		total = r.Memory.AvailableBytes
	}
	return budget{
		known:          true,
		memoryBytes:    max(total-r.Memory.ReserveBytes, 0),
		availableBytes: max(r.Memory.AvailableBytes-r.Memory.ReserveBytes, 0),
		reserveBytes:   r.Memory.ReserveBytes,
		cpuMillis:      r.CPU.AvailableMillis,
		reservedCores:  r.CPU.ReservedCores,
	}
}

// neverFits explains why n can never run on this host, even alone; "" when
// it can.
func (b budget) neverFits(d *messages.Dispatch) string {
	if !b.known {
		return ""
	}
	n := needOf(d)
	if n.MemoryBytes <= b.memoryBytes && n.CPUMillis <= b.cpuMillis {
		return ""
	}
	r := d.Sandbox.RequestedResources
	return fmt.Sprintf("the dispatch needs %s of memory (worker %s + services %s + runtime overhead %s) and %d CPU millis; "+
		"this host offers at most %s of memory after its reserve of %s, and %d CPU millis after its %d reserved cores",
		preflight.FormatBytes(n.MemoryBytes), preflight.FormatBytes(r.WorkerMemoryLimitBytes), preflight.FormatBytes(r.ServiceMemoryLimitBytes),
		preflight.FormatBytes(r.RuntimeOverheadBytes), n.CPUMillis,
		preflight.FormatBytes(b.memoryBytes), preflight.FormatBytes(b.reserveBytes), b.cpuMillis, b.reservedCores)
}

// fitsNow reports whether n fits beside what the admitted attempts hold:
// within the headroom they leave.
func (b budget) fitsNow(held, n need) bool {
	if !b.known {
		return true
	}
	return b.headroom(held).Holds(n)
}

// headroom is what one more attempt may reserve beside held: the memory
// budget less held's memory, at most the memory available now less the
// reserve, and the CPU millis less held's (negative when the admitted
// attempts hold more than the budget: a re-adoption is admitted whatever
// the budget). messages.Snapshot publishes it (nil when !known), and a
// fleet places by it.
func (b budget) headroom(held need) messages.Reservation {
	return messages.Reservation{
		MemoryBytes: min(b.memoryBytes-held.MemoryBytes, b.availableBytes),
		CPUMillis:   b.cpuMillis - held.CPUMillis,
	}
}
