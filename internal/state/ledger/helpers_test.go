package ledger

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// uuid returns a random lowercase version-4 UUID.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// sampleEntry is a valid active ledger with planned and created resources.
func sampleEntry() Entry {
	return Entry{
		AttemptID:        uuid(),
		ExecutionLeaseID: uuid(),
		FencingToken:     uuid(),
		RunnerID:         uuid(),
		RunnerInstanceID: uuid(),
		WorktreeKey:      "forge/task-1",
		ExpiresAt:        time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		State:            Active,
		Isolation:        messages.IsolationGVisor,
		WorkerRuntime:    "runsc-net",
		Planned: []Resource{
			{Type: ResourceContainer, Name: "forge-agent-x", Role: "agent"},
			{Type: ResourceNetwork, Name: "forge-x", Role: "internal"},
			{Type: ResourceVolume, Name: "forge-x-workspace", Role: "workspace"},
		},
		Created: []Resource{
			{Type: ResourceNetwork, Name: "forge-x", ID: "0123456789abcdef", Role: "internal"},
		},
		PeakMemory: &messages.SandboxTelemetry{
			SchemaVersion: messages.TelemetrySchema, Source: messages.TelemetryKernelPeak, SampleIntervalMs: 250,
			SampleCount: 40, FailedSampleCount: 1, PeakMemoryBytes: 123 << 20, FinalReading: true,
			FirstSampledAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), LastSampledAt: time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC),
			Containers: []messages.ContainerTelemetry{{ContainerID: "0123456789abcdef", Name: "forge-agent-x", Role: "agent",
				Source: messages.TelemetryKernelPeak, PeakMemoryBytes: 123 << 20, Samples: 40}},
		},
	}
}

// sampleReport is a valid teardown report with one removal.
func sampleReport() messages.CleanupReport {
	return messages.CleanupReport{
		ReportID: uuid(),
		Source:   SourceTeardown,
		Actions: []messages.CleanupAction{{
			DispatchAttemptID: uuid(),
			FencingToken:      uuid(),
			RunnerInstanceID:  uuid(),
			ResourceType:      ResourceContainer,
			ResourceID:        "4f1c0a9e2b7d",
			Outcome:           OutcomeRemoved,
			OccurredAt:        time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		}},
	}
}

// writeRaw puts data at dir/name with mode 0600, creating dir.
func writeRaw(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// hexOf is the record file name of a UUID.
func hexOf(id string) string { return fileName(id) }

// mode is the permission bits of path (not following a link).
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}
