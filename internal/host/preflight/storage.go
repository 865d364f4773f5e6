package preflight

import (
	"fmt"

	"github.com/forgedev/forged/internal/host/quota"
)

// DiskSlots is the disk side of admission: how many attempts' bounded
// volumes (workspace plus control image, see quota.PerAttemptBytes) fit in
// the free space of the state root, where the images live, above the
// disk policy's minimum free space. Without a bounding mechanism volumes
// have no size to account for, and Slots is not a limit (-1).
type DiskSlots struct {
	Path            string `json:"path,omitempty"`
	FreeBytes       int64  `json:"freeBytes"`
	ReserveBytes    int64  `json:"reserveBytes"`
	PerAttemptBytes int64  `json:"perAttemptBytes"`
	Slots           int    `json:"slots"`
}

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
func (r *Report) admitDisk() {
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
