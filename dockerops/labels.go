package dockerops

import (
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Labels put on every Docker object of an attempt.
const (
	LabelManaged          = "dev.forge.managed"
	LabelSessionID        = "dev.forge.session-id"
	LabelResourceLeaseID  = "dev.forge.resource-lease-id"
	LabelExecutionLeaseID = "dev.forge.execution-lease-id"
	LabelAttemptID        = "dev.forge.dispatch-attempt-id"
	LabelFencingToken     = "dev.forge.fencing-token"
	LabelRunnerID         = "dev.forge.runner-id"
	LabelRunnerInstanceID = "dev.forge.runner-instance-id"
	LabelProject          = "dev.forge.project"
	LabelImageDigest      = "dev.forge.image-digest"
	LabelContractDigest   = "dev.forge.contract-digest"
	LabelInitialExpiresAt = "dev.forge.initial-expires-at"
)

// maxLabelValue bounds free-text label values such as the project name.
const maxLabelValue = 120

// Ownership is the exact identity that owns an attempt's Docker objects.
// Every field is a full lowercase UUID.
type Ownership struct {
	AttemptID        string
	ExecutionLeaseID string
	RunnerID         string
	RunnerInstanceID string
	FencingToken     string
}

// OwnershipOf returns the ownership of the dispatch's resources.
func OwnershipOf(d *messages.Dispatch) Ownership {
	return Ownership{
		AttemptID:        d.Sandbox.DispatchAttemptID,
		ExecutionLeaseID: d.Sandbox.ExecutionLeaseID,
		RunnerID:         d.Execution.RunnerID,
		RunnerInstanceID: d.Sandbox.RunnerInstanceID,
		FencingToken:     d.Lease.FencingToken,
	}
}

// Validate reports failure.SandboxIdentityInvalid, naming the field, when an
// identity is not a full lowercase UUID.
func (o Ownership) Validate() error {
	ids := []struct{ name, value string }{
		{"resource lease", o.ExecutionLeaseID},
		{"dispatch attempt", o.AttemptID},
		{"runner", o.RunnerID},
		{"runner instance", o.RunnerInstanceID},
		{"fencing token", o.FencingToken},
	}
	for _, id := range ids {
		if !messages.IsFullUUID(id.value) {
			return failure.New(failure.SandboxIdentityInvalid, "%s id %q is not a full lowercase UUID", id.name, text.Clip(id.value, 64))
		}
	}
	return nil
}

// Matches reports whether labels mark a managed object owned by exactly o:
// dev.forge.managed=true and every identity label equal. An invalid
// ownership matches nothing.
func (o Ownership) Matches(labels map[string]string) bool {
	if o.Validate() != nil {
		return false
	}
	return labels[LabelManaged] == "true" &&
		labels[LabelAttemptID] == o.AttemptID &&
		labels[LabelResourceLeaseID] == o.ExecutionLeaseID &&
		labels[LabelExecutionLeaseID] == o.ExecutionLeaseID &&
		labels[LabelRunnerID] == o.RunnerID &&
		labels[LabelRunnerInstanceID] == o.RunnerInstanceID &&
		labels[LabelFencingToken] == o.FencingToken
}

// OwnershipFromLabels reads the ownership recorded on a Docker object. ok is
// false unless the object is managed, its resource and execution lease ids
// agree and every identity is a full UUID.
func OwnershipFromLabels(labels map[string]string) (o Ownership, ok bool) {
	o = Ownership{
		AttemptID:        labels[LabelAttemptID],
		ExecutionLeaseID: labels[LabelExecutionLeaseID],
		RunnerID:         labels[LabelRunnerID],
		RunnerInstanceID: labels[LabelRunnerInstanceID],
		FencingToken:     labels[LabelFencingToken],
	}
	if labels[LabelManaged] != "true" || labels[LabelResourceLeaseID] != o.ExecutionLeaseID || o.Validate() != nil {
		return Ownership{}, false
	}
	return o, true
}

// MayReap reports whether a reaper of runnerID may remove the object with
// these labels: it is managed, carries a complete ownership of this runner
// and its attempt is not live. live may be nil (nothing live).
func MayReap(labels map[string]string, runnerID string, live func(attemptID string) bool) bool {
	o, ok := OwnershipFromLabels(labels)
	if !ok || o.RunnerID != runnerID {
		return false
	}
	return live == nil || !live(o.AttemptID)
}

// Labels returns the labels of every Docker object of the dispatch's
// attempt. The five ownership ids must be full UUIDs
// (failure.SandboxIdentityInvalid otherwise); the project name is
// sanitised and bounded to 120 bytes.
func Labels(d *messages.Dispatch, imageDigest, contractDigest string) (map[string]string, error) {
	if d == nil {
		return nil, failure.New(failure.SandboxIdentityInvalid, "no dispatch")
	}
	o := OwnershipOf(d)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return map[string]string{
		LabelManaged:          "true",
		LabelSessionID:        d.Session.ID,
		LabelResourceLeaseID:  o.ExecutionLeaseID,
		LabelExecutionLeaseID: o.ExecutionLeaseID,
		LabelAttemptID:        o.AttemptID,
		LabelFencingToken:     o.FencingToken,
		LabelRunnerID:         o.RunnerID,
		LabelRunnerInstanceID: o.RunnerInstanceID,
		LabelProject:          LabelValue(d.Repo.Name),
		LabelImageDigest:      imageDigest,
		LabelContractDigest:   contractDigest,
		LabelInitialExpiresAt: d.Lease.ExpiresAt.UTC().Format(time.RFC3339Nano),
	}, nil
}

// LabelValue makes free text safe for a label: control characters become
// spaces, the result is trimmed and bounded, and never empty.
func LabelValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(text.Clip(strings.TrimSpace(s), maxLabelValue))
	if s == "" {
		return "unknown"
	}
	return s
}
