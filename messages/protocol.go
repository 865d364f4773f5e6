package messages

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
)

// This file lists the messages actors exchange. Requests answered with
// ctx.Respond are paired with their reply type.

// --- Submitting and controlling attempts (clients → root supervisor) ---

// SubmitAttempt asks the root supervisor to admit a dispatch. Subscriber,
// when not nil, receives the attempt's AttemptEvent and AttemptFinished
// messages. Replied with SubmitReply.
type SubmitAttempt struct {
	Dispatch   *Dispatch
	Subscriber *actor.PID
}

// SubmitReply answers SubmitAttempt. When Accepted is false, Code and
// Message say why (for example capacity_exhausted).
type SubmitReply struct {
	AttemptID string
	Accepted  bool
	Queued    bool
	Code      string
	Message   string
}

// CancelAttempt asks for an attempt to be cancelled, queued or running.
// Replied with CancelReply.
type CancelAttempt struct {
	AttemptID string
	Reason    string
	// Code, when set, ends the attempt as a failure with that code
	// instead of as cancelled: the fleet stops an attempt it declared
	// lost with sandbox_runner_lost.
	Code failure.Code
}

// CancelReply answers CancelAttempt.
type CancelReply struct {
	AttemptID string
	Found     bool
}

// RenewLease extends a running attempt's lease. The attempt accepts it only
// for its own fencing token and a strictly later expiry, records it, re-arms
// its watchdog and pushes a signed update into the running worker. Replied
// with RenewLeaseReply.
type RenewLease struct {
	AttemptID    string
	FencingToken string
	ExpiresAt    time.Time
}

// RenewLeaseReply answers RenewLease. When Accepted is false, Code and
// Message say why.
type RenewLeaseReply struct {
	AttemptID string    `json:"attemptId"`
	Accepted  bool      `json:"accepted"`
	ExpiresAt time.Time `json:"expiresAt"`
	Code      string    `json:"code,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// SnapshotRequest asks the root supervisor for its counts. Replied with
// Snapshot.
type SnapshotRequest struct{}

// Snapshot is the supervisor's view of its attempts.
type Snapshot struct {
	Slots    int `json:"slots"`
	Queued   int `json:"queued"`
	Starting int `json:"starting"`
	Active   int `json:"active"`
	// Degraded counts the attempts whose teardown left resources behind
	// that no reaper round has cleared yet; DegradedTotal counts every
	// such attempt since the start.
	Degraded      int      `json:"degraded"`
	DegradedTotal int      `json:"degradedTotal"`
	BuildQueue    int      `json:"buildQueue"`
	Attempts      []string `json:"attempts"`
	// Preflight is the host report the slots come from (nil when the
	// supervisor runs with a fixed number of slots).
	Preflight *HostReport `json:"preflight,omitempty"`
	// Headroom is what one more attempt may reserve now beside those
	// admitted (running, starting or tearing down): the memory budget
	// (total less the host reserve) less their reservations, at most the
	// memory available now less the reserve, and the CPU millis less
	// theirs. A dispatch whose Reservation it Holds (and a free slot)
	// starts at once. nil when the host's budget is unknown (no preflight
	// figures): only the slots then bound admission.
	Headroom *Reservation `json:"headroom,omitempty"`
	// AdmissionHeld says why the runner admits no new work while an
	// outside authority holds its admission (a fleet member cut off from
	// etcd); nil while it admits.
	AdmissionHeld *AdmissionHold `json:"admissionHeld,omitempty"`
	// Repositories is what repositories the runner can serve (nil from
	// the supervisor; the runner fills it in).
	Repositories *Repositories `json:"repositories,omitempty"`
}

// Repositories is what repositories a runner can serve: the repository
// roots a repo.localPath must lie under (none: any path), the protocols it
// fetches a repo.remote over (none: remote fetching is off) and the keys
// (remoteurl.URL.Key) of the remotes it holds mirrors of.
type Repositories struct {
	Roots           []string `json:"roots,omitempty"`
	RemoteProtocols []string `json:"remoteProtocols,omitempty"`
	Mirrors         []string `json:"mirrors,omitempty"`
}

// AdmissionHold is why, and since when, a runner admits no new work.
type AdmissionHold struct {
	Code   string    `json:"code"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// --- Attempt → subscriber ---

// AttemptEvent carries one event of an attempt's stream.
type AttemptEvent struct {
	AttemptID string
	Event     Event
}

// Outcome statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// AttemptOutcome is the final account of one attempt.
type AttemptOutcome struct {
	AttemptID       string `json:"attemptId"`
	Status          string `json:"status"`
	Code            string `json:"code,omitempty"`
	Message         string `json:"message,omitempty"`
	Phase           string `json:"phase,omitempty"`
	ResultCommitSHA string `json:"resultCommitSha,omitempty"`
	// ResultCommitCount is the number of commits between the input and the
	// result, and ResultCommits the newest of them (at most
	// MaxReportedCommits), as the host's quarantine proved them.
	ResultCommitCount int            `json:"resultCommitCount,omitempty"`
	ResultCommits     []ResultCommit `json:"resultCommits,omitempty"`
	// WorktreeLeft is set when the managed branch moved but the host
	// worktree that has it checked out was left as it was (the result tree
	// exceeds the worktree budget).
	WorktreeLeft *WorktreeLeft `json:"worktreeLeft,omitempty"`
	// PublishedCommitSHA is set when the result was pushed (bridge_push).
	PublishedCommitSHA string `json:"publishedCommitSha,omitempty"`
	// Isolation is the isolation the attempt was decided to run under
	// (IsolationRunc or IsolationGVisor: the runner's floor, raised by the
	// dispatch), set once that decision passed; empty for an attempt
	// refused before it. WorkerRuntime is the engine's OCI runtime
	// registration its worker container was created with ("runsc", or
	// "runsc-net" on an attempt network); empty when the worker ran under
	// the engine's default runtime (runc) or was never created.
	Isolation       string `json:"isolation,omitempty"`
	WorkerRuntime   string `json:"workerRuntime,omitempty"`
	WorkerExitCode  *int   `json:"workerExitCode,omitempty"`
	PeakMemoryBytes uint64 `json:"peakMemoryBytes,omitempty"`
	// Causes is the causal chain behind Code when a trusted host failure
	// decided the outcome: the worker's own account (untrusted evidence,
	// bounded), e.g. sandbox_child_result_unknown with its summary.
	Causes []FailureCause `json:"causes,omitempty"`
	// Telemetry is the attempt's resource record (per-container peaks,
	// CPU time, the kernel's counters), when anything was sampled.
	Telemetry  *SandboxTelemetry `json:"telemetry,omitempty"`
	Degraded   bool              `json:"degraded"`
	Cleanup    *CleanupReport    `json:"cleanup,omitempty"`
	FinishedAt time.Time         `json:"finishedAt"`
}

// FailureCause is one link of an outcome's causal chain.
type FailureCause struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Source is who said it: "sandbox" for the worker (untrusted).
	Source string `json:"source"`
}

// WorktreeLeft names a host worktree left behind by an import, and why.
type WorktreeLeft struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// CleanupReport is the account of one teardown: what was removed or failed,
// and how many labelled resources were still there afterwards.
type CleanupReport struct {
	ReportID  string          `json:"reportId"`
	Source    string          `json:"source"`
	Actions   []CleanupAction `json:"actions"`
	Remaining int             `json:"remaining"`
	// RemainingUnknown is set when the engine could not be listed after
	// (or during) the teardown: Remaining is then a lower bound, not a
	// count.
	RemainingUnknown bool `json:"remainingUnknown,omitempty"`
}

// CleanupAction is one removal in a CleanupReport.
type CleanupAction struct {
	DispatchAttemptID string    `json:"dispatchAttemptId"`
	FencingToken      string    `json:"fencingToken"`
	RunnerInstanceID  string    `json:"runnerInstanceId"`
	ResourceType      string    `json:"resourceType"`
	ResourceID        string    `json:"resourceId"`
	Outcome           string    `json:"outcome"`
	Message           string    `json:"message,omitempty"`
	OccurredAt        time.Time `json:"occurredAt"`
}

// AttemptFinished is sent by an attempt to its parent (the supervisor) and
// to its subscriber once teardown has completed.
type AttemptFinished struct {
	Outcome AttemptOutcome
}

// --- Attempt → root supervisor ---

// AttemptPhaseChanged reports an attempt's new phase.
type AttemptPhaseChanged struct {
	AttemptID string
	Phase     string
}

// AcquireBuildPermit asks the root supervisor for the global build permit.
// The permit is granted FIFO with BuildPermitGranted sent to the requester,
// and released with ReleaseBuildPermit or when the holder terminates.
type AcquireBuildPermit struct {
	AttemptID string
	Key       string
}

// BuildPermitGranted tells a requester it now holds the build permit.
// Build is the build that came with it when a holder handed its permit
// over (see HandOverBuildPermit), still running: the new holder owns it
// and waits for it instead of building. Nil: the holder builds itself.
type BuildPermitGranted struct {
	Build RunningBuild
}

// RunningBuild is an image build that runs apart from the attempt that
// started it, so that it can be handed over with the build permit.
type RunningBuild interface {
	// Cancel stops the build; it may be called more than once, and after
	// the build ended.
	Cancel()
}

// HandOverBuildPermit is sent (with ctx.Request) by a permit holder whose
// attempt gave up while Build runs: the supervisor passes the permit, with
// Build, to the first attempt waiting for the same key, or releases the
// permit when none waits. It answers BuildPermitHandedOver. Should the new
// holder terminate still holding the permit, the supervisor cancels Build.
type HandOverBuildPermit struct {
	Build RunningBuild
}

// BuildPermitHandedOver answers HandOverBuildPermit: HandedOver says
// another waiter now holds the permit and owns the build; otherwise the
// permit is released and the sender must cancel its build. Either way the
// sender no longer holds the permit.
type BuildPermitHandedOver struct {
	HandedOver bool
}

// BuildPermitQueued tells a requester it waits for the build permit, at
// Position (1: next) in the queue.
type BuildPermitQueued struct {
	Position int
}

// ReleaseBuildPermit gives the build permit back. Send it with
// ctx.Request so that the supervisor knows the sender.
type ReleaseBuildPermit struct{}

// MemorySampled is one reading of an attempt's agent container, sent by
// the memory sampler to its attempt (which ignores it); the metrics
// middleware keeps the last readings for the console's memory chart.
type MemorySampled struct {
	AttemptID  string
	LimitBytes int64
	Sample     MemorySample
}

// --- Inspection (debug console) ---

// Inspect asks any forged actor for its state. Replied with InspectReply.
type Inspect struct{}

// InspectReply describes one actor: its kind, phase and key facts.
type InspectReply struct {
	PID      string            `json:"pid"`
	Kind     string            `json:"kind"`
	Phase    string            `json:"phase"`
	Facts    map[string]string `json:"facts,omitempty"`
	Children []string          `json:"children,omitempty"`
}

// Attempt phases, in order.
const (
	PhaseAdmitted     = "admitted"
	PhasePreparing    = "preparing"
	PhaseBuilding     = "building"
	PhaseProvisioning = "provisioning"
	PhaseRunning      = "running"
	PhaseCollecting   = "collecting"
	PhaseImporting    = "importing"
	PhasePublishing   = "publishing"
	PhaseTearingDown  = "tearing_down"
	PhaseFinished     = "finished"
)

// IsStartingPhase reports whether an attempt in phase counts as starting
// (admitted but its worker not yet running) rather than active.
func IsStartingPhase(phase string) bool {
	switch phase {
	case PhaseAdmitted, PhasePreparing, PhaseBuilding, PhaseProvisioning:
		return true
	}
	return false
}

// --- Build → attempt ---

// BuildDone tells the attempt its sandbox image is ready.
type BuildDone struct {
	ImageID  string
	Key      string
	CacheHit bool
	// Attestations name the image policy's stored SBOM and provenance;
	// nil without an image policy (or a record, on a cache hit).
	Attestations *ImageAttestations
}

// ImageAttestations name an image's image-policy record and the
// attestations stored beside its build log.
type ImageAttestations struct {
	PolicyDigest     string
	Status           string // passed, warning
	Verdict          string // the scan's: pass, warn; "" without a scan
	SBOMPath         string
	SBOMDigest       string
	ProvenancePath   string
	ProvenanceDigest string
}

// BuildFailed tells the attempt its image could not be built.
type BuildFailed struct {
	Err error
}

// --- Attempt → publication credential redeemer ---

// PublicationRequest is what a redeemer needs to issue a publication
// credential: the grant, scoped to the attempt and its fence, and the exact
// commit to publish.
type PublicationRequest struct {
	DispatchAttemptID string
	ExecutionLeaseID  string
	FencingToken      string
	RunnerInstanceID  string
	GrantID           string
	Branch            string
	ResultCommitSHA   string
}

// MaintenanceVerdict tells the reaper and the image collector whether
// Docker maintenance may run (HostReport.MaintenanceAllowed): the root
// supervisor sends it when the host report's verdict changes, and to a
// fresh reaper or collector. While refused, they run no round and no
// collection, and answer requests with an error naming Code.
type MaintenanceVerdict struct {
	Allowed bool
	Code    failure.Code
}

// Err is nil when maintenance is allowed, else the refusal.
func (v MaintenanceVerdict) Err() error {
	if v.Allowed {
		return nil
	}
	return failure.New(v.Code, "Docker maintenance is refused while the host reports %s", v.Code)
}
