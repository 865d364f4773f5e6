package preflight

import (
	"fmt"

	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/messages"
)

// DiskSlots is messages.DiskSlots (the wire type lives there).
type DiskSlots = messages.DiskSlots

// workspaceBytes is the policy's workspace per attempt.
func (p CapacityPolicy) workspaceBytes() int64 {
	if p.WorkspaceBytes <= 0 {
		return quota.DefaultWorkspaceBytes
	}
	return p.WorkspaceBytes
}

// diskSlots computes DiskSlots from the state root's free space.
func diskSlots(path string, free int64, storage quota.Facts, disk DiskPolicy, policy CapacityPolicy) DiskSlots {
	d := DiskSlots{Path: path, FreeBytes: max(free, 0), ReserveBytes: disk.withDefaults().MinimumWorkspaceBytes,
		PerAttemptBytes: quota.PerAttemptBytes(policy.workspaceBytes()), Slots: -1}
	if storage.Bounded() {
		d.Slots = int(max(d.FreeBytes-d.ReserveBytes, 0) / d.PerAttemptBytes)
	}
	return d
}

// admitDisk bounds the report's capacity by the disk slots.
func admitDisk(r *Report) {
	if r.Code != "" || r.DiskSlots.Slots < 0 {
		return
	}
	if r.DiskSlots.Slots == 0 {
		d := r.DiskSlots
		r.Capacity, r.Code = 0, DockerDiskLow
		r.Reason = fmt.Sprintf("%s has %s free; less the reserve of %s, that leaves no room for one attempt's volumes (%s: workspace and control images)",
			d.Path, formatBytes(d.FreeBytes), formatBytes(d.ReserveBytes), formatBytes(d.PerAttemptBytes))
		return
	}
	r.Capacity = min(r.Capacity, r.DiskSlots.Slots)
}
