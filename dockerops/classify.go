package dockerops

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

var (
	oomPattern     = regexp.MustCompile(`(?i)(oomkilled|out of memory|memory cgroup out of memory|cannot allocate memory)`)
	pidPattern     = regexp.MustCompile(`(?i)(resource temporarily unavailable|cannot fork|fork:\s*(retry|resource)|pthread_create[^.]*resource|process limit|pids? limit)`)
	storagePattern = regexp.MustCompile(`(?i)(no space left on device|disk quota exceeded|\benospc\b|workspace quota|storage limit)`)
	fdPattern      = regexp.MustCompile(`(?i)(too many open files|\bemfile\b|\benfile\b)`)
	blankRuns      = regexp.MustCompile(`[\r\n\t]+`)
)

// resourceFailures maps trusted diagnostics to machine codes, first match
// wins.
var resourceFailures = []struct {
	pattern *regexp.Regexp
	code    failure.Code
	message string
}{
	{oomPattern, failure.SandboxOOMKilled, "the sandbox ran out of its memory allowance"},
	{pidPattern, failure.SandboxPIDExhausted, "the sandbox hit its process (PID) limit"},
	{storagePattern, failure.SandboxStorageExhausted, "the sandbox ran out of workspace storage"},
	{fdPattern, failure.SandboxFDExhausted, "the sandbox hit its open-file limit"},
}

// ClassifyResourceFailure maps a trusted engine diagnostic (the container
// state's Error, never the worker's own output) to a resource-exhaustion
// code and message. ok is false when the diagnostic names no exhausted
// resource.
func ClassifyResourceFailure(diagnostic string) (code failure.Code, message string, ok bool) {
	d := text.Clip(strings.TrimSpace(blankRuns.ReplaceAllString(diagnostic, " ")), 2000)
	if d == "" {
		return "", "", false
	}
	for _, f := range resourceFailures {
		if f.pattern.MatchString(d) {
			return f.code, f.message, true
		}
	}
	return "", "", false
}

// WorkerFailureMessage describes a worker that exited without producing
// its output manifest, with a bounded one-line diagnostic from the engine's
// container error and the worker's stderr. It carries no code prefix; the
// caller attaches failure.SandboxWorkerFailed.
func WorkerFailureMessage(exitCode int, stderr, containerError string) string {
	var parts []string
	for _, s := range []string{containerError, stderr} {
		if strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	diagnostic := text.Clip(strings.TrimSpace(blankRuns.ReplaceAllString(strings.Join(parts, " "), " ")), 1000)
	msg := fmt.Sprintf("worker exited with code %d without writing its output manifest", exitCode)
	if diagnostic == "" {
		return msg + "; no diagnostic was captured"
	}
	return msg + "; diagnostic: " + strings.ToValidUTF8(diagnostic, "")
}

// ResourceEvidence is everything the host knows about how a worker ended,
// for ClassifyHostFailure: the engine's inspected state, the kernel's
// counters of the container's cgroup, the host's own statfs of the
// container's file systems, and the worker's report.
type ResourceEvidence struct {
	// ExitCode is the worker container's exit code.
	ExitCode int
	State    ContainerState
	// MemoryLimitBytes and PidsLimit are the container's limits.
	MemoryLimitBytes int64
	PidsLimit        int64
	// Kernel holds the host's facts; Worker the worker's report (nil when
	// none arrived, as when the worker itself was killed).
	Kernel KernelFacts
	Worker *messages.TaskResources
	// VolumesFull, when not empty, says which bounded volumes the host
	// measured full after the worker exited (quota.Usage).
	VolumesFull string
}

// KernelFacts are the host's own facts about a container: the kernel's
// cgroup counters and statfs of its file systems through
// /proc/<pid>/root. A *Known field is false when the host could not read
// that fact (a remote or rootless engine, a container gone too soon).
type KernelFacts struct {
	OOMKills      uint64
	OOMKnown      bool
	PidsMaxEvents uint64
	PidsKnown     bool
	Storage       []messages.StorageObservation
	StorageKnown  bool
	// StorageFinal is true when Storage includes a reading taken after the
	// task ended (the sampler's last reading): only then does it override
	// the worker's report.
	StorageFinal bool
}

// unread names the facts the host could not read, "" when it read them
// all.
func (k KernelFacts) unread() string {
	var missing []string
	if !k.OOMKnown {
		missing = append(missing, "the cgroup's OOM kills")
	}
	if !k.PidsKnown {
		missing = append(missing, "pids.events")
	}
	if !k.StorageKnown {
		missing = append(missing, "the sandbox's file systems")
	}
	return strings.Join(missing, ", ")
}

// tmpfsShareOfMemory is the share of the memory limit a tmpfs must hold,
// at an OOM kill, for the kill to be reported as storage exhaustion: the
// kernel charges tmpfs pages to the container's memory, so a task that
// fills /tmp meets the memory limit before the tmpfs size.
const tmpfsShareOfMemory = 2 // half of the limit

// ClassifyHostFailure chooses the resource-exhaustion code of a worker
// that failed, from trusted facts first. A host fact overrides whatever
// the worker claims; the worker's report is taken only where the host has
// no fact of its own (descriptors: the kernel keeps no count of EMFILE);
// the task's own output is never read. The message keeps the chain: the
// conclusion, the facts behind it, and how the task and worker ended.
// It returns nil when nothing names an exhausted resource.
//
// In order: a full file system (a tmpfs holding at least half the memory
// limit at an OOM kill counts as full: the kernel charged it to memory;
// then a bounded volume the host measured full after the worker exited
// (VolumesFull); then the worker's exit watch seeing a file system full
// while it held the task at a syscall that frees storage, which counts
// even against the host's final reading, taken after the task freed it);
// an OOM kill (State.OOMKilled or the cgroup's oom_kill count); forks
// refused at pids.max; descriptors at RLIMIT_NOFILE (the worker's
// report); and last the engine's own error text (ClassifyResourceFailure).
// Only an OOM kill classifies a worker that exited 0.
func ClassifyHostFailure(ev ResourceEvidence) *failure.Error {
	var chain []string
	if w := ev.Worker; w != nil && w.TaskFailed {
		chain = append(chain, fmt.Sprintf("task exited %d", w.TaskExitCode))
	}
	if ev.ExitCode != 0 {
		chain = append(chain, fmt.Sprintf("worker exited %d", ev.ExitCode))
	}
	oom := ev.State.OOMKilled || ev.Kernel.OOMKills > 0
	var oomFacts []string
	if ev.State.OOMKilled {
		oomFacts = append(oomFacts, "the engine reports the container OOM-killed")
	}
	if ev.Kernel.OOMKills > 0 {
		oomFacts = append(oomFacts, fmt.Sprintf("host saw the memory cgroup OOM-kill %d process(es)", ev.Kernel.OOMKills))
	}
	failed := ev.ExitCode != 0 || (ev.Worker != nil && ev.Worker.TaskFailed)
	if !failed && !oom {
		return nil
	}
	// What the host could not read is said, never passed over: the code
	// then rests on the engine's state or the worker's report alone (under
	// the shipped unit, ProtectProc=invisible hides the counters).
	if missing := ev.Kernel.unread(); missing != "" {
		chain = append(chain, "the host could not read "+missing+" (see forged preflight, kernel facts)")
	}
	result := func(code failure.Code, summary string, facts ...string) *failure.Error {
		parts := append(append([]string{}, facts...), chain...)
		return failure.New(code, "%s: %s", summary, strings.Join(parts, "; "))
	}

	// Storage: the host's statfs from its last reading, taken after the
	// task ended, is the fact. Without it, what the host saw earlier
	// counts first, then the worker's own statfs (taken after the task).
	type view struct {
		source  string
		storage []messages.StorageObservation
	}
	var views []view
	var freed *messages.StorageObservation // full when the exit watch held the task
	switch {
	case ev.Kernel.StorageKnown && ev.Kernel.StorageFinal:
		views = []view{{"host", ev.Kernel.Storage}}
		if ev.Worker != nil {
			for _, w := range ev.Worker.Storage {
				if w.FullWhenFreed && !storageFull(ev.Kernel.Storage, w.Path) && freed == nil {
					// Full while the exit watch held the task at a syscall
					// that frees storage: the task freed it since. The
					// host's own facts still come first.
					freed = &w
					continue
				}
				if w.Full && !storageFull(ev.Kernel.Storage, w.Path) {
					chain = append(chain, fmt.Sprintf("worker reported %s full, host statfs disagrees", text.Clip(w.Path, 128)))
				}
			}
		}
	default:
		if ev.Kernel.StorageKnown {
			views = append(views, view{"host", ev.Kernel.Storage})
		}
		if ev.Worker != nil {
			views = append(views, view{"worker", ev.Worker.Storage})
		}
	}
	// A bounded volume the host measured full comes after the host's own
	// statfs and before anything the worker saw.
	volumesFull := func() *failure.Error {
		if ev.ExitCode == 0 || ev.VolumesFull == "" {
			return nil
		}
		return result(failure.SandboxStorageExhausted, "the sandbox ran out of its bounded storage",
			append([]string{text.Clip(ev.VolumesFull, 300)}, oomFacts...)...)
	}
	for _, v := range views {
		if v.source == "worker" {
			if err := volumesFull(); err != nil {
				return err
			}
		}
		for _, s := range v.storage {
			switch {
			case s.Full:
				return result(failure.SandboxStorageExhausted, "the sandbox ran out of storage",
					append([]string{fmt.Sprintf("%s saw %s full (%d of %d bytes free)", v.source, text.Clip(s.Path, 128), s.MinFreeBytes, s.TotalBytes)}, oomFacts...)...)
			case oom && s.TmpfsInMemory && ev.MemoryLimitBytes > 0 && s.MaxUsedBytes >= uint64(ev.MemoryLimitBytes)/tmpfsShareOfMemory:
				return result(failure.SandboxStorageExhausted, "the sandbox ran out of storage",
					append([]string{fmt.Sprintf("%s saw the tmpfs %s hold %d bytes of the %d-byte memory limit it is charged to", v.source, text.Clip(s.Path, 128), s.MaxUsedBytes, ev.MemoryLimitBytes)}, oomFacts...)...)
			}
		}
	}
	if err := volumesFull(); err != nil {
		return err
	}
	if freed != nil {
		return result(failure.SandboxStorageExhausted, "the sandbox ran out of storage",
			append([]string{fmt.Sprintf("worker saw %s full while it held a task process about to free storage or exit (%d of %d bytes free)", text.Clip(freed.Path, 128), freed.MinFreeBytes, freed.TotalBytes)}, oomFacts...)...)
	}
	if oom {
		return result(failure.SandboxOOMKilled, "the sandbox ran out of its memory allowance", oomFacts...)
	}
	if ev.Kernel.PidsMaxEvents > 0 {
		return result(failure.SandboxPIDExhausted, "the sandbox hit its process (PID) limit",
			fmt.Sprintf("host saw pids.max (%d) reached: %d fork(s) refused", ev.PidsLimit, ev.Kernel.PidsMaxEvents))
	}
	if !ev.Kernel.PidsKnown && ev.Worker != nil && ev.PidsLimit > 0 && int64(ev.Worker.MaxProcesses) >= ev.PidsLimit-1 {
		return result(failure.SandboxPIDExhausted, "the sandbox hit its process (PID) limit",
			fmt.Sprintf("worker saw %d processes beside itself under a limit of %d", ev.Worker.MaxProcesses, ev.PidsLimit))
	}
	if w := ev.Worker; w != nil && w.FDExhausted {
		how := "worker saw a task process hold %d descriptors at its limit of %d"
		if w.ExitWatch {
			how += " (the exit watch looks at each task process as it exits)"
		}
		return result(failure.SandboxFDExhausted, "the sandbox hit its open-file limit", fmt.Sprintf(how, w.MaxOpenFiles, w.FDLimit))
	}
	if ev.ExitCode != 0 {
		if code, summary, ok := ClassifyResourceFailure(ev.State.Error); ok {
			return result(code, summary, "the engine's error: "+text.Clip(strings.TrimSpace(blankRuns.ReplaceAllString(ev.State.Error, " ")), 300))
		}
	}
	return nil
}

func storageFull(list []messages.StorageObservation, path string) bool {
	for _, s := range list {
		if s.Path == path {
			return s.Full
		}
	}
	return false
}
