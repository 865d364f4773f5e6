package messages

import (
	"fmt"
	"time"

	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
)

// TelemetrySchema is the version of SandboxTelemetry this build writes and
// the only one it reads.
const TelemetrySchema = 1

// Sources of a memory peak, per container and for the whole record.
const (
	// TelemetryKernelPeak: the kernel's own high-water mark (cgroup v1
	// memory.max_usage_in_bytes, v2 memory.peak). Exact: no spike is
	// missed between readings.
	TelemetryKernelPeak = "cgroup_kernel_peak"
	// TelemetryCgroupSampled: the cgroup's current usage, polled (cgroup
	// v2 before Linux 5.19 has no memory.peak).
	TelemetryCgroupSampled = "cgroup_sampled"
	// TelemetryEngineStats: Engine API stats, polled (the cgroup files
	// cannot be read from here: a remote or rootless engine).
	TelemetryEngineStats = "docker_stats_sampled"
	// TelemetryMixed: the containers' sources differ (record level only).
	TelemetryMixed = "mixed"
)

// Bounds of a telemetry record.
const (
	maxTelemetryContainers = 32
	maxSafeInteger         = 1<<53 - 1 // what a JSON number holds exactly
	maxTelemetryName       = 255
	maxTelemetryRole       = 64
)

// SandboxTelemetry is an attempt's resource record: the peak memory of
// each of its containers (with its role and where the number came from),
// the aggregate, CPU time, and the kernel's failure counters. It is the
// data of the sandbox_peak_memory_observed event and is carried by the
// ledger and the outcome.
//
// PeakMemoryBytes is the aggregate: the sum of the containers' peaks. With
// kernel peaks this is an upper bound of the simultaneous peak (the
// containers' peaks need not coincide); with one container it is exact.
type SandboxTelemetry struct {
	SchemaVersion     int    `json:"schemaVersion"`
	Source            string `json:"source"`
	SampleIntervalMs  int    `json:"sampleIntervalMs"`
	SampleCount       int    `json:"sampleCount"`
	FailedSampleCount int    `json:"failedSampleCount"`
	PeakMemoryBytes   uint64 `json:"peakMemoryBytes"`
	CPUUsageNanos     uint64 `json:"cpuUsageNanos"`
	CPUThrottledNanos uint64 `json:"cpuThrottledNanos"`
	// FinalReading is true when a reading was taken after the task had
	// finished, while the containers still existed.
	FinalReading   bool                 `json:"finalReading"`
	FirstSampledAt time.Time            `json:"firstSampledAt"`
	LastSampledAt  time.Time            `json:"lastSampledAt"`
	Containers     []ContainerTelemetry `json:"containers"`
}

// ContainerTelemetry is one container's part of a SandboxTelemetry.
type ContainerTelemetry struct {
	ContainerID     string `json:"containerId"`
	Name            string `json:"name"`
	Role            string `json:"role"`
	Source          string `json:"source"`
	PeakMemoryBytes uint64 `json:"peakMemoryBytes"`
	Samples         int    `json:"samples"`
	// CPU time and the kernel's failure counters, from the cgroup (zero
	// under docker_stats_sampled, which has none).
	CPUUsageNanos     uint64 `json:"cpuUsageNanos"`
	CPUThrottledNanos uint64 `json:"cpuThrottledNanos"`
	OOMKills          uint64 `json:"oomKills"`
	PidsMaxEvents     uint64 `json:"pidsMaxEvents"`
}

func knownSource(s string, record bool) bool {
	switch s {
	case TelemetryKernelPeak, TelemetryCgroupSampled, TelemetryEngineStats:
		return true
	case TelemetryMixed:
		return record
	}
	return false
}

// Validate checks the record as the seed does (validSandboxPeakMemoryTelemetry):
// a known schema and source, at least one successful sample, bounded
// counts, sampling times, and at most 32 containers each with an engine
// id, a name and a role without control characters.
func (t SandboxTelemetry) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("telemetry: "+format, args...)
	}
	switch {
	case t.SchemaVersion != TelemetrySchema:
		return bad("schemaVersion %d is not %d", t.SchemaVersion, TelemetrySchema)
	case !knownSource(t.Source, true):
		return bad("source %q is unknown", text.Clip(t.Source, 32))
	case t.SampleIntervalMs < 1 || t.SampleIntervalMs > 30_000:
		return bad("sampleIntervalMs %d is outside 1..30000", t.SampleIntervalMs)
	case t.SampleCount < 1:
		return bad("sampleCount %d: no successful sample", t.SampleCount)
	case t.FailedSampleCount < 0:
		return bad("failedSampleCount is negative")
	case t.PeakMemoryBytes > maxSafeInteger || t.CPUUsageNanos > maxSafeInteger || t.CPUThrottledNanos > maxSafeInteger:
		return bad("a counter exceeds 2^53-1")
	case t.FirstSampledAt.IsZero() || t.LastSampledAt.Before(t.FirstSampledAt):
		return bad("sampling times are missing or out of order")
	case len(t.Containers) == 0 || len(t.Containers) > maxTelemetryContainers:
		return bad("%d containers, not 1..%d", len(t.Containers), maxTelemetryContainers)
	}
	for i, c := range t.Containers {
		switch {
		case !ids.IsEngineID(c.ContainerID):
			return bad("containers[%d].containerId is not an engine id", i)
		case !plainText(c.Name, maxTelemetryName):
			return bad("containers[%d].name is empty, too long or has control characters", i)
		case !plainText(c.Role, maxTelemetryRole):
			return bad("containers[%d].role is empty, too long or has control characters", i)
		case !knownSource(c.Source, false):
			return bad("containers[%d].source %q is unknown", i, text.Clip(c.Source, 32))
		case c.Samples < 0:
			return bad("containers[%d].samples is negative", i)
		case c.PeakMemoryBytes > maxSafeInteger || c.CPUUsageNanos > maxSafeInteger || c.CPUThrottledNanos > maxSafeInteger ||
			c.OOMKills > maxSafeInteger || c.PidsMaxEvents > maxSafeInteger:
			return bad("containers[%d]: a counter exceeds 2^53-1", i)
		}
	}
	return nil
}

// plainText reports whether s has 1..max bytes and no control characters.
func plainText(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// TaskResourcesEvent is the worker's lifecycle event reporting what
// it saw of its task's resources; its data is a TaskResources.
const TaskResourcesEvent = "task_resources"

// TaskResources is the worker's own account of its task's resources,
// observed from outside the task (statfs, /proc), never from the task's
// output. It is evidence from inside the sandbox: the host accepts a claim
// only where it has no fact of its own, and its own facts win.
type TaskResources struct {
	// TaskFailed is true when the task did not exit 0; TaskExitCode is its
	// exit status (128+signal when a signal ended it).
	TaskFailed   bool `json:"taskFailed"`
	TaskExitCode int  `json:"taskExitCode"`
	// Storage lists the writable file systems the worker watched, with
	// the fewest free bytes seen.
	Storage []StorageObservation `json:"storage"`
	// FDExhausted is true when a task process was seen holding as many
	// open descriptors as its RLIMIT_NOFILE allows; MaxOpenFiles is the
	// most seen in one process, FDLimit that process's limit.
	FDExhausted  bool `json:"fdExhausted"`
	MaxOpenFiles int  `json:"maxOpenFiles"`
	FDLimit      int  `json:"fdLimit"`
	// MaxProcesses is the most processes seen at once beside the worker:
	// the task's and the worker's OOM guards, which all count against
	// pids.max.
	MaxProcesses int `json:"maxProcesses"`
	// ExitWatch is true when the worker held each task process at its exit
	// and before each syscall that frees storage, and looked then (the
	// exit watch, internal/worker): FDExhausted and FullWhenFreed are then
	// seen however quickly the task ends.
	ExitWatch bool `json:"exitWatch,omitempty"`
}

// StorageObservation is one watched file system.
type StorageObservation struct {
	Path          string `json:"path"`
	TotalBytes    uint64 `json:"totalBytes"`
	MinFreeBytes  uint64 `json:"minFreeBytes"`
	MaxUsedBytes  uint64 `json:"maxUsedBytes"`
	Full          bool   `json:"full"`
	TmpfsInMemory bool   `json:"tmpfs"`
	// FullWhenFreed is true when the file system was full at a moment the
	// exit watch held a task process at a syscall that frees storage or
	// ends it: it was full, even if the task freed it since.
	FullWhenFreed bool `json:"fullWhenFreed,omitempty"`
}
