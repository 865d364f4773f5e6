package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/quota"
)

func imageStorage(rootless bool) quota.Facts {
	if rootless {
		return quota.Facts{Mechanism: quota.MechanismNone, Reason: "rootless"}
	}
	return quota.Facts{Mechanism: quota.MechanismImage}
}

// TestDiskSlotsBoundAdmission: with bounded volumes, each attempt needs
// its workspace and control images in the state root's free space above
// the reserve; without a mechanism the disk slots are no limit.
func TestDiskSlotsBoundAdmission(t *testing.T) {
	host := bigHost()
	host.disks["/state"] = [2]int64{200 << 30, 20 << 30} // 10 GiB above the 10 GiB reserve
	opts := Options{Endpoint: "unix:///var/run/docker.sock", AllowRootful: true, DetectStorage: imageStorage,
		Capacity: CapacityPolicy{WorkspaceBytes: 2 << 30}}
	r := check(t, rootfulEngine(), host, opts)
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, quota.MechanismImage, r.Storage.Mechanism)
	per := int64(2<<30) + int64(600<<20) + int64(32<<20) // workspace + output budget + overhead
	assert.Equal(t, DiskSlots{Path: "/state", FreeBytes: 20 << 30, ReserveBytes: 10 << 30, PerAttemptBytes: per, Slots: 3}, r.DiskSlots)
	assert.Equal(t, 3, r.Slots())

	host.disks["/state"] = [2]int64{200 << 30, 12 << 30}
	r = check(t, rootfulEngine(), host, opts)
	assert.Equal(t, DockerDiskLow, r.Code)
	assert.Contains(t, r.Reason, "no room for one attempt's volumes")
	assert.Zero(t, r.DiskSlots.Slots)

	opts.DetectStorage = func(bool) quota.Facts { return quota.Facts{Mechanism: quota.MechanismNone, Reason: "no loop devices"} }
	r = check(t, rootfulEngine(), host, opts)
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, -1, r.DiskSlots.Slots, "unbounded volumes are not counted")
	assert.Equal(t, "no loop devices", r.Storage.Reason)
}
