package ledger

import (
	"regexp"
	"time"

	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Adoption is what a new forged process needs, beside the rest of the
// ledger, to re-adopt a running attempt after a restart (see
// docs/operations.md, "Restarts and upgrades"). The attempt writes it once
// its worker container exists and keeps it current with every later
// ledger write. The lease itself (id, fence, expiry) is the entry's own;
// the container, volumes and network are its Created resources.
type Adoption struct {
	// WorkerProtocol is the worker protocol version the worker was started
	// with (messages.WorkerProtocolVersion); a forged that does not speak
	// it refuses to adopt.
	WorkerProtocol int `json:"workerProtocol"`
	// ContainerID is the worker container's id.
	ContainerID string `json:"containerId"`
	// Image is the sandbox image the worker runs.
	Image string `json:"image"`
	// Network is the worker's network ("" for none).
	Network string `json:"network,omitempty"`
	// InputCommitSHA and ContractDigest are the identity the worker echoes
	// in its manifest; the state file must reproduce them.
	InputCommitSHA string `json:"inputCommitSha"`
	ContractDigest string `json:"contractDigest"`
	// StateDigest is "sha256:<hex>" of the attempt's state file (its
	// dispatch, prepared input and contract, in its work directory):
	// a state file that does not match is damaged.
	StateDigest string `json:"stateDigest"`
	// SealedControlKey is the attempt's control key (which signs lease
	// updates and, derived, the worker's events), sealed with the state
	// root's host key (Seal, bound to the attempt id). Never in plain text.
	SealedControlKey string `json:"sealedControlKey"`
	// LeaseRenewals counts the renewals the attempt accepted;
	// LeaseRenewedAt is the last one's time. The renewed expiry is the
	// entry's ExpiresAt.
	LeaseRenewals  int       `json:"leaseRenewals"`
	LeaseRenewedAt time.Time `json:"leaseRenewedAt,omitempty"`
	// WorkerCreatedAt is when the worker container was created: the
	// host's time limits (hard wall) run from it, across restarts.
	WorkerCreatedAt time.Time `json:"workerCreatedAt"`
	// Resources is what the attempt holds on the host (its capacity slot).
	Resources messages.RequestedResources `json:"resources"`
	// PublicationMode and PublishGrant are the publication request.
	PublicationMode string                 `json:"publicationMode"`
	PublishGrant    *messages.PublishGrant `json:"publishGrant,omitempty"`
	// EventSeq is the sequence number of the next worker event the host
	// has not yet delivered; a re-adopting host resumes the worker's event
	// log there.
	EventSeq uint64 `json:"eventSeq"`
	// ExitSeen says the host saw the worker exit and went on to collect
	// its output (written before the output is collected): such an attempt
	// is past running and is not re-adopted.
	ExitSeen bool `json:"exitSeen,omitempty"`
}

// Bounds of an adoption record.
const (
	maxAdoptionID     = 255
	maxSealedKeyBytes = 2048
)

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// validate checks an adoption record's fields (Entry.Validate calls it).
func (a *Adoption) validate() error {
	switch {
	case a.WorkerProtocol < 1:
		return invalid("adoption.workerProtocol %d is not a version", a.WorkerProtocol)
	case !boundedText(a.ContainerID, 1, maxAdoptionID):
		return invalid("adoption.containerId is empty, too long or has control characters")
	case !boundedText(a.Image, 1, maxAdoptionID):
		return invalid("adoption.image is empty, too long or has control characters")
	case !boundedText(a.Network, 0, maxAdoptionID):
		return invalid("adoption.network is too long or has control characters")
	case !messages.IsFullSHA(a.InputCommitSHA):
		return invalid("adoption.inputCommitSha is not a full lowercase object id")
	case !boundedText(a.ContractDigest, 1, maxAdoptionID):
		return invalid("adoption.contractDigest is empty, too long or has control characters")
	case !digestPattern.MatchString(a.StateDigest):
		return invalid("adoption.stateDigest %q is not sha256:<64 hex>", text.Ellipsis(a.StateDigest, 80))
	case !boundedText(a.SealedControlKey, 1, maxSealedKeyBytes):
		return invalid("adoption.sealedControlKey is empty, too long or has control characters")
	case a.LeaseRenewals < 0:
		return invalid("adoption.leaseRenewals is negative")
	case a.WorkerCreatedAt.IsZero():
		return invalid("adoption.workerCreatedAt is missing")
	case !boundedText(a.PublicationMode, 1, maxRoleBytes):
		return invalid("adoption.publicationMode is empty, too long or has control characters")
	}
	return nil
}
