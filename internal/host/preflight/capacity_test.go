package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/failure"
)

func TestCapacity(t *testing.T) {
	perAttempt := 2*gib + 128*mib // default worker + overhead
	cases := []struct {
		name     string
		disk     DiskState
		memory   int64
		cores    int
		policy   CapacityPolicy
		memSlots int
		cpuSlots int
		capacity int
		code     failure.Code
		reason   []string
	}{
		{"big host capped by default max", DiskState{}, 64 * gib, 32, CapacityPolicy{}, 29, 15, 3, "", nil},
		{"configured max", DiskState{}, 64 * gib, 32, CapacityPolicy{MaxSlots: 8}, 29, 15, 8, "", nil},
		{"cpu bound", DiskState{}, 64 * gib, 5, CapacityPolicy{MaxSlots: 8}, 29, 2, 2, "", nil},
		{"memory bound", DiskState{}, 2*gib + 2*perAttempt + 1, 32, CapacityPolicy{MaxSlots: 8}, 2, 15, 2, "", nil},
		{"memory exactly one attempt", DiskState{}, 2*gib + perAttempt, 4, CapacityPolicy{}, 1, 1, 1, "", nil},
		{"memory one byte short", DiskState{}, 2*gib + perAttempt - 1, 4, CapacityPolicy{}, 0, 1, 0, DockerMemoryLow,
			[]string{"4.1 GiB of memory available", "host reserve of 2.0 GiB", "one attempt needs 2.1 GiB"}},
		{"memory under the reserve", DiskState{}, gib, 4, CapacityPolicy{}, 0, 1, 0, DockerMemoryLow, []string{"leaves 0 B"}},
		{"services and overhead count", DiskState{}, 2*gib + 3*gib, 8, CapacityPolicy{WorkerMemoryBytes: gib, ServiceMemoryBytes: gib, RuntimeOverheadBytes: 512 * mib}, 1, 3, 1, "", nil},
		{"overhead below minimum is raised", DiskState{}, 2*gib + 2*gib + 128*mib, 8, CapacityPolicy{WorkerMemoryBytes: gib, RuntimeOverheadBytes: mib}, 1, 3, 1, "", nil},
		{"two cores keep one for the host", DiskState{}, 64 * gib, 2, CapacityPolicy{}, 29, 0, 0, DockerCPULow,
			[]string{"2 CPU cores with 1 kept for the host leave 1000 millis; one attempt needs 2000"}},
		{"three cores", DiskState{}, 64 * gib, 3, CapacityPolicy{}, 29, 1, 1, "", nil},
		{"no cores known", DiskState{}, 64 * gib, 0, CapacityPolicy{}, 29, 0, 0, DockerCPULow, nil},
		{"smaller cpu share", DiskState{}, 64 * gib, 2, CapacityPolicy{CPUMillisPerAttempt: 500}, 29, 2, 2, "", nil},
		{"no host core reserved", DiskState{}, 64 * gib, 2, CapacityPolicy{HostReservedCores: -1}, 29, 1, 1, "", nil},
		{"memory reported before cpu", DiskState{}, 0, 1, CapacityPolicy{}, 0, 0, 0, DockerMemoryLow, nil},
		{"disk low wins", DiskState{Path: "/var/lib/docker", TotalBytes: 100 * gib, FreeBytes: 5 * gib, UsedRatio: 0.95, Low: true,
			MinimumFreeBytes: 10 * gib, HighWatermark: 0.9, LowWatermark: 0.8}, 0, 1, CapacityPolicy{}, 0, 0, 0, DockerDiskLow,
			[]string{"/var/lib/docker has 5.0 GiB free of 100.0 GiB (95.0% used)", "below 10.0 GiB free or at 90% used", "recovers at 80% used"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Capacity(tc.disk, tc.memory, tc.cores, tc.policy)
			assert.Equal(t, tc.memSlots, a.Memory.Slots, "memory slots")
			assert.Equal(t, tc.cpuSlots, a.CPU.Slots, "cpu slots")
			assert.Equal(t, tc.capacity, a.Capacity, "capacity")
			assert.Equal(t, tc.code, a.Code)
			if tc.code == "" {
				assert.Empty(t, a.Reason)
			} else {
				assert.NotEmpty(t, a.Reason)
			}
			for _, want := range tc.reason {
				assert.Contains(t, a.Reason, want)
			}
		})
	}
}

func TestMaintenanceAllowed(t *testing.T) {
	for code, want := range map[failure.Code]bool{
		"": true, DockerDiskLow: true, DockerMemoryLow: true, DockerCPULow: true,
		DockerUnreachable: false, PlatformUnsupported: false, DockerLinuxRequired: false, DockerRootlessRequired: false,
	} {
		assert.Equal(t, want, MaintenanceAllowedFor(code), code)
		assert.Equal(t, want, Report{Code: code}.MaintenanceAllowed(), code)
	}
}

func TestReportSlotsAndErr(t *testing.T) {
	ok := Report{Available: true, Capacity: 2}
	assert.Equal(t, 2, ok.Slots())
	assert.NoError(t, ok.Err())
	low := Report{Code: DockerCPULow, Reason: "no cores", Capacity: 0}
	assert.Equal(t, 0, low.Slots())
	assert.True(t, failure.Is(low.Err(), DockerCPULow))
	assert.Contains(t, low.Err().Error(), "no cores")
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536 * mib: "1.5 GiB", 3 << 40: "3.0 TiB"} {
		assert.Equal(t, want, formatBytes(n))
	}
}

func TestCapacityPolicyDefaultsAreIdempotent(t *testing.T) {
	keepNone := CapacityPolicy{HostReservedCores: -1}.withDefaults().withDefaults()
	a := Capacity(DiskState{TotalBytes: 100 << 30, FreeBytes: 90 << 30}, 64<<30, 2, keepNone)
	if a.CPU.ReservedCores != 0 || a.CPU.Slots != 1 {
		t.Fatalf("keeping no core after defaults applied twice: reserved %d, cpu slots %d", a.CPU.ReservedCores, a.CPU.Slots)
	}
}
