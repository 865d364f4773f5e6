package preflight

import (
	"fmt"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// CapacityPolicy sizes one attempt and the host's share. Zero fields take
// the defaults.
type CapacityPolicy struct {
	// MaxSlots is the configured maximum of concurrent attempts. Default 3.
	MaxSlots int `json:"maxSlots"`
	// HostReserveBytes is memory kept for the host. Default 2 GiB.
	HostReserveBytes int64 `json:"hostReserveBytes"`
	// WorkerMemoryBytes is one worker container's memory limit. Default 2 GiB.
	WorkerMemoryBytes int64 `json:"workerMemoryBytes"`
	// ServiceMemoryBytes is the memory of one attempt's service containers.
	// Default 0 (no services).
	ServiceMemoryBytes int64 `json:"serviceMemoryBytes"`
	// RuntimeOverheadBytes covers the runtime helpers of one attempt.
	// Default and minimum 128 MiB.
	RuntimeOverheadBytes int64 `json:"runtimeOverheadBytes"`
	// CPUMillisPerAttempt is one attempt's CPU share. Default 2000.
	CPUMillisPerAttempt int64 `json:"cpuMillisPerAttempt"`
	// HostReservedCores are kept for the host. Default 1; negative means 0.
	HostReservedCores int `json:"hostReservedCores"`
	// WorkspaceBytes is one attempt's workspace for the disk slots.
	// Default quota.DefaultWorkspaceBytes.
	WorkspaceBytes int64 `json:"workspaceBytes"`
}

const mib = int64(1) << 20

func (p CapacityPolicy) withDefaults() CapacityPolicy {
	if p.MaxSlots <= 0 {
		p.MaxSlots = 3
	}
	if p.HostReserveBytes <= 0 {
		p.HostReserveBytes = 2 * gib
	}
	if p.WorkerMemoryBytes <= 0 {
		p.WorkerMemoryBytes = 2 * gib
	}
	p.ServiceMemoryBytes = max(p.ServiceMemoryBytes, 0)
	p.RuntimeOverheadBytes = max(p.RuntimeOverheadBytes, 128*mib)
	if p.CPUMillisPerAttempt <= 0 {
		p.CPUMillisPerAttempt = 2000
	}
	if p.HostReservedCores == 0 {
		p.HostReservedCores = 1
	}
	// A negative value (keep no core) stays negative so that applying the
	// defaults twice cannot turn it into the default of one core.
	return p
}

// Memory is messages.MemorySlots (the wire type lives there).
type Memory = messages.MemorySlots

// CPU is messages.CPUSlots (the wire type lives there).
type CPU = messages.CPUSlots

// Admission is the verdict of Capacity. Code and Reason are empty when
// Capacity is positive.
type Admission struct {
	Memory   Memory       `json:"memory"`
	CPU      CPU          `json:"cpu"`
	MaxSlots int          `json:"maxSlots"`
	Capacity int          `json:"capacity"`
	Code     failure.Code `json:"code,omitempty"`
	Reason   string       `json:"reason,omitempty"`
}

// Capacity computes how many attempts fit: memory slots are the available
// memory less the host reserve divided by one attempt's memory (worker +
// services + runtime overhead); CPU slots are the cores less the host's,
// in millis, divided by one attempt's millis; the capacity is the least of
// the configured maximum, the CPU slots and the memory slots. A low disk
// forces 0. When the capacity is 0 the code names the first cause in the
// order disk, memory, CPU, and the reason gives the numbers.
func Capacity(disk DiskState, availableMemoryBytes int64, cores int, policy CapacityPolicy) Admission {
	p := policy.withDefaults()
	mem := Memory{
		AvailableBytes:  max(availableMemoryBytes, 0),
		ReserveBytes:    p.HostReserveBytes,
		PerAttemptBytes: p.WorkerMemoryBytes + p.ServiceMemoryBytes + p.RuntimeOverheadBytes,
	}
	admissible := max(mem.AvailableBytes-mem.ReserveBytes, 0)
	mem.Slots = int(admissible / mem.PerAttemptBytes)

	cpu := CPU{Cores: max(cores, 0), ReservedCores: max(p.HostReservedCores, 0), MillisPerAttempt: p.CPUMillisPerAttempt}
	cpu.AvailableMillis = max(int64(cpu.Cores-cpu.ReservedCores), 0) * 1000
	cpu.Slots = int(cpu.AvailableMillis / cpu.MillisPerAttempt)

	a := Admission{Memory: mem, CPU: cpu, MaxSlots: p.MaxSlots}
	switch {
	case disk.Low:
		a.Code, a.Reason = DockerDiskLow, diskReason(disk)
	case mem.Slots == 0:
		a.Code = DockerMemoryLow
		a.Reason = fmt.Sprintf("%s of memory available less the host reserve of %s leaves %s; one attempt needs %s (worker %s + services %s + runtime overhead %s)",
			formatBytes(mem.AvailableBytes), formatBytes(mem.ReserveBytes), formatBytes(admissible), formatBytes(mem.PerAttemptBytes),
			formatBytes(p.WorkerMemoryBytes), formatBytes(p.ServiceMemoryBytes), formatBytes(p.RuntimeOverheadBytes))
	case cpu.Slots == 0:
		a.Code = DockerCPULow
		a.Reason = fmt.Sprintf("%d CPU cores with %d kept for the host leave %d millis; one attempt needs %d",
			cpu.Cores, cpu.ReservedCores, cpu.AvailableMillis, cpu.MillisPerAttempt)
	default:
		a.Capacity = min(p.MaxSlots, cpu.Slots, mem.Slots)
	}
	return a
}

func diskReason(d DiskState) string {
	path := d.Path
	if path == "" {
		path = "the Docker root directory"
	}
	if d.TotalBytes <= 0 {
		return fmt.Sprintf("the size of %s is unknown", path)
	}
	return fmt.Sprintf("%s has %s free of %s (%.1f%% used); the disk is low below %s free or at %.0f%% used, and recovers at %.0f%% used",
		path, formatBytes(d.FreeBytes), formatBytes(d.TotalBytes), d.UsedRatio*100,
		formatBytes(d.MinimumFreeBytes), d.HighWatermark*100, d.LowWatermark*100)
}

// formatBytes renders n in IEC units with one decimal ("2.5 GiB").
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// FormatBytes renders n in IEC units with one decimal ("2.5 GiB"), as every
// preflight reason does.
func FormatBytes(n int64) string { return formatBytes(n) }
