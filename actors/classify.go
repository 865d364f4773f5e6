package actors

import (
	"fmt"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/messages"
)

// resourceFailure classifies the worker's end from trusted facts: the
// engine's inspected state, the kernel's counters and the host's statfs
// that the sampler collected, and the worker's own report where the host
// has no fact (dockerops.ClassifyHostFailure). The task's output never
// chooses a code. It returns nil when no resource was exhausted.
func (a *attemptActor) resourceFailure() error {
	exit := a.worker.exit
	if exit == nil || exit.Err != nil {
		return nil
	}
	res := a.d.Sandbox.RequestedResources
	err := dockerops.ClassifyHostFailure(dockerops.ResourceEvidence{
		ExitCode:         exit.ExitCode,
		State:            exit.State,
		MemoryLimitBytes: res.WorkerMemoryLimitBytes,
		PidsLimit:        int64(res.PIDs),
		Kernel:           a.worker.telemetry.Kernel,
		Worker:           a.worker.telemetry.Worker,
		VolumesFull:      exit.StorageFull,
	})
	if err != nil {
		return err // a *failure.Error: never returned as a typed nil
	}
	return nil
}

// peakMemoryEvent is the sandbox_peak_memory_observed event carrying the
// telemetry record.
func peakMemoryEvent(t *messages.SandboxTelemetry) messages.Event {
	n := len(t.Containers)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return messages.RunnerEvent("sandbox_peak_memory_observed",
		fmt.Sprintf("Observed sandbox peak memory %.1f MiB across %d container%s (%s, %d sample(s)).",
			float64(t.PeakMemoryBytes)/(1<<20), n, plural, t.Source, t.SampleCount), t)
}
