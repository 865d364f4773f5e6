package ledger

import (
	"path"
	"sort"

	"github.com/forgedev/forged/internal/kit/text"
)

// The seed's ledger keeps, beside the resources, what the attempt reserved
// on the host, the paths of its sandbox and the exact labels its Docker
// objects carry. forged's ledger does the same (Entry.Reservation, Paths
// and Labels), so that an operator, or a reaper reading the ledger alone,
// sees what an attempt held without asking the engine.

// Bounds of the snapshot.
const (
	maxPaths          = 32
	maxPathBytes      = 255
	maxLabels         = 64
	maxLabelKeyBytes  = 128
	maxLabelValBytes  = 512
	maxReservationVal = 1 << 50 // no host has a PiB of memory, nor a million cores
)

// Reservation is what the attempt reserved on the host: its memory (the
// worker's, its services' and the runtime overhead), CPU and PIDs. The
// JSON names are the seed's runtime lease resources.
type Reservation struct {
	MemoryBytes int64 `json:"memoryReservationBytes"`
	CPUMillis   int64 `json:"cpuMillis"`
	PIDs        int64 `json:"pids"`
}

// Path is one path of the sandbox and its role ("worktree", "control",
// "temporary", "home", "secrets", "cache:npm"…).
type Path struct {
	Path string `json:"path"`
	Role string `json:"role"`
}

// validSnapshot checks the reservation, paths and labels of e.
func (e Entry) validSnapshot() error {
	if r := e.Reservation; r != nil {
		for _, v := range []struct {
			field string
			value int64
		}{{"memoryReservationBytes", r.MemoryBytes}, {"cpuMillis", r.CPUMillis}, {"pids", r.PIDs}} {
			if v.value <= 0 || v.value > maxReservationVal {
				return invalid("reservation.%s %d is not positive or is implausibly large", v.field, v.value)
			}
		}
	}
	if len(e.Paths) > maxPaths {
		return invalid("paths lists %d paths, more than %d", len(e.Paths), maxPaths)
	}
	for i, p := range e.Paths {
		switch {
		case !boundedText(p.Path, 1, maxPathBytes) || !path.IsAbs(p.Path) || path.Clean(p.Path) != p.Path:
			return invalid("paths[%d].path %q is not a clean absolute path", i, text.Ellipsis(p.Path, 64))
		case !boundedText(p.Role, 1, maxRoleBytes):
			return invalid("paths[%d].role is empty, too long or has control characters", i)
		}
	}
	if len(e.Labels) > maxLabels {
		return invalid("labels has %d labels, more than %d", len(e.Labels), maxLabels)
	}
	keys := make([]string, 0, len(e.Labels))
	for k := range e.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad label is the same on every run
	for _, k := range keys {
		switch {
		case !boundedText(k, 1, maxLabelKeyBytes):
			return invalid("label key %q is empty, too long or has control characters", text.Ellipsis(k, 64))
		case !boundedText(e.Labels[k], 0, maxLabelValBytes):
			return invalid("label %s's value is too long or has control characters", text.Ellipsis(k, 64))
		}
	}
	return nil
}
