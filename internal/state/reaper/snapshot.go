package reaper

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// MaxSnapshotAttempts bounds a server snapshot: a runner never holds
// nearly as many live attempts.
const MaxSnapshotAttempts = 4096

// Snapshot is the server's list of this runner's live attempts, the body
// of POST /v1/reap ({"attemptSnapshot": [...]}, the seed's name). A round
// given one keeps a ledger only while the server holds its attempt with
// the same fence and instance and an unexpired lease (ShouldReapLedger);
// an empty list says the server holds none.
type Snapshot struct {
	Attempts []ServerAttempt `json:"attemptSnapshot"`
}

// ParseSnapshot decodes and checks a POST /v1/reap body strictly (one
// document, no unknown or duplicate fields). An empty body is no
// snapshot (nil). Every failure is failure.ReapRequestInvalid.
func ParseSnapshot(body []byte) (*Snapshot, error) {
	if len(body) == 0 {
		return nil, nil
	}
	var s Snapshot
	if err := strictjson.Decode(body, &s); err != nil {
		return nil, failure.New(failure.ReapRequestInvalid, "the reap request body is not {attemptSnapshot: [...]}: %v", err)
	}
	if s.Attempts == nil {
		return nil, failure.New(failure.ReapRequestInvalid, "the reap request body has no attemptSnapshot list; send none for a round without a snapshot, or [] for an empty one")
	}
	if len(s.Attempts) > MaxSnapshotAttempts {
		return nil, failure.New(failure.ReapRequestInvalid, "attemptSnapshot lists %d attempts, more than %d", len(s.Attempts), MaxSnapshotAttempts)
	}
	for i, a := range s.Attempts {
		for _, id := range []struct{ field, value string }{
			{"dispatchAttemptId", a.AttemptID}, {"fencingToken", a.FencingToken}, {"runnerInstanceId", a.RunnerInstanceID},
		} {
			if !messages.IsFullUUID(id.value) {
				return nil, failure.New(failure.ReapRequestInvalid, "attemptSnapshot[%d].%s is not a full lowercase UUID", i, id.field)
			}
		}
		if a.ExpiresAt.IsZero() {
			return nil, failure.New(failure.ReapRequestInvalid, "attemptSnapshot[%d].expiresAt is missing", i)
		}
	}
	return &s, nil
}

// Apply sets cfg's server snapshot from s (nil: none).
func (s *Snapshot) Apply(cfg *Config) {
	if s == nil {
		return
	}
	cfg.ServerSnapshot = s.Attempts
	cfg.SnapshotAvailable = true
}

// AuditRetention makes every round collect the stored build logs and
// attestations by the seed's retention (imagegc.PurgeAudit), as the
// seed's reap does: keys in use (Refs) stay, and of the others the newest
// Policy.AuditKeep stay while younger than Policy.AuditMaxAge.
type AuditRetention struct {
	StateRoot string
	Policy    imagegc.Policy
	Refs      *imagegc.Refs
}
