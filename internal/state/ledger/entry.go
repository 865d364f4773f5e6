package ledger

import (
	"github.com/forgedev/forged/internal/kit/text"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// SchemaVersion is the version of the ledger format this package writes
// and the only one it reads.
const SchemaVersion = 1

// Bounds of a ledger's content.
const (
	maxResources   = 64
	maxNameBytes   = 255
	maxRoleBytes   = 64
	maxWorktreeKey = 255
)

// Resource types a ledger records (the same words as cleanup reports).
const (
	ResourceContainer = "container"
	ResourceNetwork   = "network"
	ResourceVolume    = "volume"
	// ResourceVolumeImage is the filesystem image behind a bounded volume
	// (cleanup reports only).
	ResourceVolumeImage = "volume_image"
)

// Resource is one Docker object of an attempt: planned (Name and Role
// known, ID empty) or created (ID known).
type Resource struct {
	Type string `json:"type"`
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	Role string `json:"role,omitempty"`
}

// Entry is one attempt's ledger: who owns its Docker objects, until when
// its lease runs, in which lease state it is, and which objects it planned
// and created. The five identities are full lowercase UUIDs.
type Entry struct {
	SchemaVersion    int        `json:"schemaVersion"`
	AttemptID        string     `json:"attemptId"`
	ExecutionLeaseID string     `json:"executionLeaseId"`
	FencingToken     string     `json:"fencingToken"`
	RunnerID         string     `json:"runnerId"`
	RunnerInstanceID string     `json:"runnerInstanceId"`
	WorktreeKey      string     `json:"worktreeKey"`
	ExpiresAt        time.Time  `json:"expiresAt"`
	State            State      `json:"state"`
	Planned          []Resource `json:"planned"`
	Created          []Resource `json:"created"`
	// Isolation and WorkerRuntime are the attempt's isolation and its
	// worker's OCI runtime registration, as in its outcome
	// (messages.AttemptOutcome): Isolation once decided, WorkerRuntime
	// once the worker was created under a runtime other than the engine's
	// default. A re-adopted attempt reports them from here. Absent in
	// ledgers written before they were recorded.
	Isolation     string `json:"isolation,omitempty"`
	WorkerRuntime string `json:"workerRuntime,omitempty"`
	// PeakMemory is the attempt's resource record, once sampled.
	PeakMemory *messages.SandboxTelemetry `json:"peakMemory,omitempty"`
	// Adoption, once the worker exists, is what a restarted forged needs
	// to re-adopt the attempt (adoption.go).
	Adoption  *Adoption `json:"adoption,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`

	// Reservation, Paths and Labels are the seed's snapshot of what the
	// attempt reserved, the sandbox's paths and its objects' exact labels
	// (snapshot.go).
	Reservation *Reservation      `json:"reservation,omitempty"`
	Paths       []Path            `json:"paths,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// Validate reports CodeLedgerInvalid, naming the field, when e does not
// satisfy the ledger schema. A zero SchemaVersion is read as the current
// one only by Store.Write, which fills it in before validating.
func (e Entry) Validate() error {
	if e.SchemaVersion != SchemaVersion {
		return invalid("schemaVersion %d is not %d", e.SchemaVersion, SchemaVersion)
	}
	ids := []struct{ field, value string }{
		{"attemptId", e.AttemptID},
		{"executionLeaseId", e.ExecutionLeaseID},
		{"fencingToken", e.FencingToken},
		{"runnerId", e.RunnerID},
		{"runnerInstanceId", e.RunnerInstanceID},
	}
	for _, id := range ids {
		if !messages.IsFullUUID(id.value) {
			return invalid("%s %q is not a full lowercase UUID", id.field, text.Ellipsis(id.value, 64))
		}
	}
	if !boundedText(e.WorktreeKey, 1, maxWorktreeKey) {
		return invalid("worktreeKey is empty, too long or has control characters")
	}
	if e.ExpiresAt.IsZero() {
		return invalid("expiresAt is missing")
	}
	if !e.State.Known() {
		return invalid("state %q is unknown", text.Ellipsis(string(e.State), 32))
	}
	if err := validResources("planned", e.Planned); err != nil {
		return err
	}
	if err := validResources("created", e.Created); err != nil {
		return err
	}
	switch e.Isolation {
	case "", messages.IsolationRunc, messages.IsolationGVisor:
	default:
		return invalid("isolation %q is not %q or %q", text.Ellipsis(e.Isolation, 32), messages.IsolationRunc, messages.IsolationGVisor)
	}
	if !boundedText(e.WorkerRuntime, 0, maxRoleBytes) {
		return invalid("workerRuntime is too long or has control characters")
	}
	if p := e.PeakMemory; p != nil {
		if err := p.Validate(); err != nil {
			return invalid("peakMemory: %v", err)
		}
	}
	if a := e.Adoption; a != nil {
		if err := a.validate(); err != nil {
			return err
		}
	}
	return e.validSnapshot()
}

// validResources checks one resource list.
func validResources(field string, list []Resource) error {
	if len(list) > maxResources {
		return invalid("%s lists %d resources, more than %d", field, len(list), maxResources)
	}
	for i, r := range list {
		switch {
		case !knownResourceType(r.Type):
			return invalid("%s[%d].type %q is unknown", field, i, text.Ellipsis(r.Type, 32))
		case !boundedText(r.Name, 1, maxNameBytes):
			return invalid("%s[%d].name is empty, too long or has control characters", field, i)
		case !boundedText(r.ID, 0, maxNameBytes):
			return invalid("%s[%d].id is too long or has control characters", field, i)
		case !boundedText(r.Role, 0, maxRoleBytes):
			return invalid("%s[%d].role is too long or has control characters", field, i)
		}
	}
	return nil
}

// knownResourceType reports whether t is container, network, volume or
// volume image.
func knownResourceType(t string) bool {
	return t == ResourceContainer || t == ResourceNetwork || t == ResourceVolume || t == ResourceVolumeImage
}

// boundedText reports whether s has between min and max bytes and no
// control characters.
func boundedText(s string, min, max int) bool {
	return len(s) >= min && len(s) <= max && !hasControl(s)
}

// hasControl reports whether s contains a C0 control character or DEL.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// invalid is a CodeLedgerInvalid error.
func invalid(format string, args ...any) error {
	return failure.New(CodeLedgerInvalid, format, args...)
}
