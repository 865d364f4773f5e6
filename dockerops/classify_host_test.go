package dockerops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func failedTask(code int) *messages.TaskResources {
	return &messages.TaskResources{TaskFailed: true, TaskExitCode: code,
		Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MinFreeBytes: 1 << 29, TmpfsInMemory: true}, {Path: "/workspace", TotalBytes: 1 << 40, MinFreeBytes: 1 << 39}}}
}

func TestClassifyHostFailure(t *testing.T) {
	const mem = 256 << 20
	kernel := func(k KernelFacts) KernelFacts { k.OOMKnown, k.PidsKnown = true, true; return k }
	cases := map[string]struct {
		ev       ResourceEvidence
		code     failure.Code
		contains []string
	}{
		"fork bomb: the host's pids.events": {
			ev:       ResourceEvidence{ExitCode: 1, PidsLimit: 64, Kernel: kernel(KernelFacts{PidsMaxEvents: 37}), Worker: failedTask(2)},
			code:     failure.SandboxPIDExhausted,
			contains: []string{"host saw pids.max (64) reached: 37 fork(s) refused", "task exited 2", "worker exited 1"},
		},
		"OOM from the cgroup counter alone": {
			ev:       ResourceEvidence{ExitCode: 1, Kernel: kernel(KernelFacts{OOMKills: 1}), Worker: failedTask(137)},
			code:     failure.SandboxOOMKilled,
			contains: []string{"OOM-kill 1 process(es)", "task exited 137"},
		},
		"OOM from the engine's state, even when the worker exited 0": {
			ev:   ResourceEvidence{ExitCode: 0, State: ContainerState{OOMKilled: true}},
			code: failure.SandboxOOMKilled,
		},
		"a full tmpfs charged to memory is storage, not OOM": {
			ev: ResourceEvidence{ExitCode: 137, MemoryLimitBytes: mem, State: ContainerState{OOMKilled: true},
				Kernel: KernelFacts{OOMKills: 1, OOMKnown: true, StorageKnown: true, Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MinFreeBytes: 800 << 20, MaxUsedBytes: 230 << 20, TmpfsInMemory: true}}}},
			code:     failure.SandboxStorageExhausted,
			contains: []string{"tmpfs /tmp hold", "OOM-kill 1"},
		},
		"a full file system by statfs": {
			ev:       ResourceEvidence{ExitCode: 1, Kernel: KernelFacts{StorageKnown: true, Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 64 << 20, MinFreeBytes: 0, Full: true, TmpfsInMemory: true}}}, Worker: failedTask(1)},
			code:     failure.SandboxStorageExhausted,
			contains: []string{"host saw /tmp full"},
		},
		"the worker's storage claim, where the host has no statfs": {
			ev:   ResourceEvidence{ExitCode: 1, Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, Storage: []messages.StorageObservation{{Path: "/workspace", Full: true}}}},
			code: failure.SandboxStorageExhausted,
			// Under the unit (ProtectProc=invisible) the host reads no
			// kernel fact: the fallback says so (issue 28, finding 9).
			contains: []string{"worker saw /workspace full", "the host could not read the cgroup's OOM kills, pids.events, the sandbox's file systems (see forged preflight, kernel facts)"},
		},
		"the worker's process count, where the host has no pids.events": {
			ev:       ResourceEvidence{ExitCode: 1, PidsLimit: 64, Kernel: KernelFacts{OOMKnown: true, StorageKnown: true}, Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, MaxProcesses: 63}},
			code:     failure.SandboxPIDExhausted,
			contains: []string{"worker saw 63 processes beside itself under a limit of 64", "the host could not read pids.events (see"},
		},
		"full when the exit watch held the task, though the host's final statfs is after the task freed it": {
			ev: ResourceEvidence{ExitCode: 1, Kernel: KernelFacts{StorageKnown: true, StorageFinal: true, Storage: []messages.StorageObservation{{Path: "/workspace", TotalBytes: 256 << 20, MinFreeBytes: 250 << 20}}},
				Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, ExitWatch: true, Storage: []messages.StorageObservation{{Path: "/workspace", TotalBytes: 256 << 20, Full: true, FullWhenFreed: true}}}},
			code:     failure.SandboxStorageExhausted,
			contains: []string{"worker saw /workspace full while it held a task process"},
		},
		"a bounded volume the host measured full comes before the exit watch": {
			ev: ResourceEvidence{ExitCode: 1, VolumesFull: "volume forge-ab-workspace is full (0 bytes free)",
				Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, ExitWatch: true, Storage: []messages.StorageObservation{{Path: "/workspace", Full: true, FullWhenFreed: true}}}},
			code:     failure.SandboxStorageExhausted,
			contains: []string{"ran out of its bounded storage: volume forge-ab-workspace is full"},
		},
		"descriptors: the worker's report": {
			ev:       ResourceEvidence{ExitCode: 1, Kernel: kernel(KernelFacts{}), Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, FDExhausted: true, MaxOpenFiles: 4096, FDLimit: 4096}},
			code:     failure.SandboxFDExhausted,
			contains: []string{"4096 descriptors at its limit of 4096"},
		},
		"the engine's error text, last": {
			ev:   ResourceEvidence{ExitCode: 1, State: ContainerState{Error: "no space left on device"}},
			code: failure.SandboxStorageExhausted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ClassifyHostFailure(tc.ev)
			require.NotNil(t, err)
			assert.Equal(t, tc.code, err.Code, err.Message)
			for _, s := range tc.contains {
				assert.Contains(t, err.Message, s)
			}
			if k := tc.ev.Kernel; k.OOMKnown && k.PidsKnown && k.StorageKnown {
				assert.NotContains(t, err.Message, "could not read", "every fact was read")
			}
		})
	}
}

func TestClassifyHostFailureHostFactsWin(t *testing.T) {
	// The worker claims a full /tmp; the host's statfs says otherwise.
	claim := failedTask(1)
	claim.Storage[0].Full = true
	err := ClassifyHostFailure(ResourceEvidence{ExitCode: 1, Worker: claim,
		Kernel: KernelFacts{StorageKnown: true, StorageFinal: true, Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MinFreeBytes: 1 << 29}}}})
	assert.Nil(t, err)

	// The host's statfs from before the task ended is stale: the worker's
	// own statfs, taken after the task, is the better fact.
	err = ClassifyHostFailure(ResourceEvidence{ExitCode: 137, MemoryLimitBytes: 256 << 20, State: ContainerState{OOMKilled: true},
		Worker: &messages.TaskResources{TaskFailed: true, TaskExitCode: 1, Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MaxUsedBytes: 250 << 20, TmpfsInMemory: true}}},
		Kernel: KernelFacts{OOMKills: 2, OOMKnown: true, StorageKnown: true, Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MaxUsedBytes: 4096, TmpfsInMemory: true}}}})
	require.NotNil(t, err)
	assert.Equal(t, failure.SandboxStorageExhausted, err.Code)
	assert.Contains(t, err.Message, "worker saw the tmpfs /tmp hold")

	// A task that only exited 1 names no resource, whatever it printed.
	assert.Nil(t, ClassifyHostFailure(ResourceEvidence{ExitCode: 1, Worker: failedTask(1), Kernel: KernelFacts{OOMKnown: true, PidsKnown: true}}))
	// A successful task with counters from an earlier, survived refusal.
	assert.Nil(t, ClassifyHostFailure(ResourceEvidence{ExitCode: 0, Kernel: KernelFacts{PidsMaxEvents: 3, PidsKnown: true}}))
	// With the host's pids.events known, the worker's process count is not
	// a claim that counts.
	w := failedTask(1)
	w.MaxProcesses = 64
	assert.Nil(t, ClassifyHostFailure(ResourceEvidence{ExitCode: 1, PidsLimit: 64, Worker: w, Kernel: KernelFacts{PidsKnown: true}}))
}
