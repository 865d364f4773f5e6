package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// The attempt's state, in the parts the pipeline fills one after the
// other. The sidecars' part is sidecarSet (attempt_sidecars.go), the time
// limits' limitTimers (timelimit.go).

// attemptInput is what the prepare and provision steps learned.
type attemptInput struct {
	workDir  string // the attempt's private copies on the host
	prepared *gitops.Prepared
	contract *contract.Parsed
	security []string // resolved worker security options
	names    dockerops.Names
	labels   map[string]string
	// provisioned: the volumes were (at least partly) created.
	provisioned bool
	// cacheMounts are the contract's caches the worker mounts.
	cacheMounts []dockerops.CacheMount
	// bundlePlaced: the input bundle was written into the control
	// volume's image; the worker's start copies it in otherwise.
	bundlePlaced bool
	// stateDigest is the digest of the attempt's adoption state file
	// (readopt.go); "" when it could not be written.
	stateDigest string
	// confinement is the engine's and host's facts as this attempt runs
	// under them, its isolation resolved once at start
	// (attemptConfinement).
	confinement Confinement
	// isolation is confinement's isolation (messages.IsolationRunc or
	// IsolationGVisor) once decided, or the ledger's for a re-adopted
	// attempt; "" before the decision.
	isolation string
}

// attemptImage is the sandbox image: the build actor while it resolves
// it, then its id.
type attemptImage struct {
	build *actor.PID
	id    string
}

// attemptWorker is the worker: its actor, its container, what it reported
// and what the host measured.
type attemptWorker struct {
	pid         *actor.PID
	containerID string
	exit        *WorkerExited
	telemetry   SamplerReport
	// controlKey is the worker's lease-update key; packetExpiry the lease
	// expiry in its start packet.
	controlKey   string
	packetExpiry time.Time
	running      bool // the worker reported it started
	// runtime is the engine's OCI runtime registration the worker is
	// created with ("": the engine's default).
	runtime string
	// What the ledger's adoption record keeps (readopt.go): the sealed
	// control key, when the container was created, the next event
	// sequence number not yet delivered, the renewals accepted, and
	// whether a checkpoint of the sequence is being written (and another
	// is due).
	sealedKey       string
	createdAt       time.Time
	eventSeq        uint64
	renewals        int
	renewedAt       time.Time
	checkpointing   bool
	checkpointDirty bool
	// pending are the events held until their checkpoint is durable.
	pending []pendingEvent
}

// attemptLedger is the attempt's ledger writer and what it last posted.
type attemptLedger struct {
	writer  *ledgerWriter
	written bool         // the planned ledger was posted
	state   ledger.State // the state last posted
}

// post posts e (the attempt's ledger in state) without waiting, and
// remembers the state; the returned channel says when it is durable.
func (l *attemptLedger) post(state ledger.State, e ledger.Entry) <-chan error {
	l.state, l.written = state, true
	return l.writer.post(e)
}

// close closes the writer, once it exists: a step still in flight may post
// to it, and is answered errLedgerClosed.
func (l *attemptLedger) close() {
	if l.writer != nil {
		l.writer.close()
	}
}

// verdict is what decides the attempt's outcome: its first failure, the
// host's facts behind it, and what the pipeline delivered.
type verdict struct {
	failure     error
	failedPhase string // the phase the attempt was in at its first failure
	cancelled   bool
	trusted     error                   // a resource failure from host facts (resourceFailure)
	causes      []messages.FailureCause // the worker's account behind a trusted failure
	// pipelineDone: every step succeeded, only teardown remains.
	pipelineDone bool
	result       string
	imported     gitops.ImportReport // the host's account of the result
	published    string              // the commit pushed to the remote (bridge_push)
}

// failIn records the attempt's first failure as having happened in phase;
// later ones are consequences.
func (v *verdict) failIn(phase string, err error) {
	if v.failure == nil && err != nil {
		v.failure = err
		v.failedPhase = phase
	}
}
