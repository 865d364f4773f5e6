package runner

import (
	"sync"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// An admission hold is an outside authority's "no new work" (a fleet
// member cut off from etcd: internal/fleet). While it holds, Submit
// refuses every dispatch with the hold's code; the attempts already
// admitted go on. The snapshot and the admission_held metric say so.
type admissionHold struct {
	mu   sync.Mutex
	held *messages.AdmissionHold
}

func (h *admissionHold) get() *messages.AdmissionHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		return nil
	}
	held := *h.held
	return &held
}

// HoldAdmission makes the runner refuse new dispatches with code and
// reason (one sentence) until ReleaseAdmission. A second hold replaces
// the reason and keeps the first one's time.
func (r *Runner) HoldAdmission(code failure.Code, reason string) {
	r.hold.mu.Lock()
	since := time.Now().UTC()
	if r.hold.held != nil {
		since = r.hold.held.Since
	}
	r.hold.held = &messages.AdmissionHold{Code: string(code), Reason: reason, Since: since}
	r.hold.mu.Unlock()
	r.metrics.AdmissionHeld(true)
	r.logger.Warn("admission held: no new work is admitted", "code", code, "reason", reason)
}

// ReleaseAdmission ends the hold; a runner not held is unchanged.
func (r *Runner) ReleaseAdmission() {
	r.hold.mu.Lock()
	was := r.hold.held
	r.hold.held = nil
	r.hold.mu.Unlock()
	r.metrics.AdmissionHeld(false)
	if was != nil {
		r.logger.Warn("admission released", "code", was.Code, "heldFor", time.Since(was.Since).Round(time.Second))
	}
}

// heldReply is Submit's refusal of d while admission is held.
func heldReply(d *messages.Dispatch, held *messages.AdmissionHold) messages.SubmitReply {
	return messages.SubmitReply{AttemptID: d.AttemptID(), Code: held.Code, Message: held.Reason}
}
