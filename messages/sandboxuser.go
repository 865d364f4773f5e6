package messages

import "strconv"

// SandboxUser is the numeric identity one attempt's sandbox runs as: the
// worker, the task and every helper container forged runs for the attempt
// that writes the attempt's files. The supervisor gives each capacity slot
// its own uid (an operator range, see supervisor.UIDRange), so the
// kernel's per-uid limits (inotify instances and watches, POSIX message
// queues, pending signals) are per attempt, not shared by every sandbox.
// The image's own files stay owned by the fixed image user (WorkerUID,
// WorkerGID) and readable: the image key never depends on an attempt's uid.
type SandboxUser struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// ImageUser is the owner of the agent image's files (the overlay's
// skeleton directories), and the sandbox user of an attempt that was not
// given one (tests, and attempts re-adopted from a ledger written before
// sandbox users were recorded).
var ImageUser = SandboxUser{UID: WorkerUID, GID: WorkerGID}

// IsZero reports whether u was never set.
func (u SandboxUser) IsZero() bool { return u == SandboxUser{} }

// OrImage returns u, or ImageUser when u is unset.
func (u SandboxUser) OrImage() SandboxUser {
	if u.IsZero() {
		return ImageUser
	}
	return u
}

// String is the engine's numeric "uid:gid" form (container.Config.User).
func (u SandboxUser) String() string {
	return strconv.Itoa(u.UID) + ":" + strconv.Itoa(u.GID)
}
