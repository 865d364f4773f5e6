//go:build linux || darwin

package preflight

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// diskUsage is statfs of path's nearest existing ancestor.
func diskUsage(path string) (int64, int64, error) {
	p, err := existingAncestor(path)
	if err != nil {
		return 0, 0, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", p, err)
	}
	bsize := uint64(st.Bsize)
	return clampInt64(st.Blocks * bsize), clampInt64(st.Bavail * bsize), nil
}

func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
