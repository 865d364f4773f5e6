package messages

import "time"

// The bodies of the daemon's HTTP API (internal/daemon/httpapi serves
// them on the daemon's unix socket; package client reads them). Requests
// and replies the API shares with the actor protocol (Dispatch, Snapshot,
// InspectReply, RenewLeaseReply, CleanupReport, Event, AttemptOutcome) are
// in protocol.go and beside it.

// The daemon API's request guard (internal/daemon/httpapi): the Host name
// package client and the CLI send over the unix socket, and the header
// every state-changing request (POST, DELETE) carries with
// `Content-Type: application/json`. A browser page of another origin can
// set neither without a CORS preflight, which the daemon never grants.
const (
	APISocketHost   = "forged"
	APIClientHeader = "X-Forged-Client"
	APIClientValue  = "1"
)

// APIError is the body of every refusal and failure the API answers: the
// failure code (package failure's registry gives its HTTP status) and a
// message for a person.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SubmitAccepted is the body of an admitted POST /v1/attempts (202).
type SubmitAccepted struct {
	AttemptID string `json:"attemptId"`
	Queued    bool   `json:"queued"`
}

// CancelAccepted is the body of an accepted DELETE /v1/attempts/{id} (202).
type CancelAccepted struct {
	AttemptID string `json:"attemptId"`
}

// Attempt states a listing (GET /v1/attempts?state=) selects.
const (
	AttemptStateRunning  = "running"  // admitted or queued, no outcome yet
	AttemptStateFinished = "finished" // an outcome, and still retained
	AttemptStateAll      = "all"
)

// Listing limits: the default and the largest limit of GET /v1/attempts.
const (
	DefaultAttemptListLimit = 50
	MaxAttemptListLimit     = 1000
)

// AttemptSummary is one attempt in a listing.
type AttemptSummary struct {
	AttemptID   string    `json:"attemptId"`
	State       string    `json:"state"`
	SubmittedAt time.Time `json:"submittedAt"`
	// Events counts the events recorded (dropped ones included).
	Events int `json:"events"`
	// Outcome is set once finished.
	Outcome *AttemptOutcome `json:"outcome,omitempty"`
}

// AttemptList is the body of GET /v1/attempts.
type AttemptList struct {
	Attempts []AttemptSummary `json:"attempts"`
}

// The types of the events stream's lines.
const (
	StreamLineEvent    = "event"
	StreamLineFinished = "finished"
)

// StreamLine is one NDJSON line of GET /v1/attempts/{id}/events: an event
// (Type StreamLineEvent) with its sequence number, or the outcome that ends
// the stream (Type StreamLineFinished). An attempt's events are numbered
// 1, 2, … in order, durably across restarts of the daemon: a client that
// reconnects asks for the events after the last Seq it saw
// (?after=<seq>) and gets each of the rest once.
type StreamLine struct {
	Type    string          `json:"type"`
	Seq     int             `json:"seq,omitempty"`
	Event   *Event          `json:"event,omitempty"`
	Outcome *AttemptOutcome `json:"outcome,omitempty"`
}

// RenewRequest is the body of POST /v1/attempts/{id}/lease: the attempt's
// fencing token and the new, strictly later, expiry. The answer is a
// RenewLeaseReply.
type RenewRequest struct {
	FencingToken string    `json:"fencingToken"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// ConsoleConfig is the body of GET /v1/console/config: whether the
// console may cancel attempts.
type ConsoleConfig struct {
	Manage bool `json:"manage"`
}

// ConsoleFrame is one picture of the daemon for the live console: one
// "frame" Server-Sent Event of GET /v1/inspect/stream.
type ConsoleFrame struct {
	At       time.Time     `json:"at"`
	Actors   []ActorView   `json:"actors"`
	Snapshot *Snapshot     `json:"snapshot,omitempty"`
	Attempts []AttemptView `json:"attempts"`
}

// ActorView is one live actor as the console shows it: its InspectReply
// and, when instrumented, its counters.
type ActorView struct {
	InspectReply
	Stats *ActorStats `json:"stats,omitempty"`
}

// MemorySeries is the body of GET /v1/attempts/{id}/memory: the memory
// sampler's last readings of the attempt's agent container, oldest first,
// and the container's memory limit (0 before the first reading).
type MemorySeries struct {
	AttemptID  string         `json:"attemptId"`
	LimitBytes int64          `json:"limitBytes"`
	Samples    []MemorySample `json:"samples"`
}

// MemorySample is one reading: the memory in use and, when the kernel's
// counters are read, the CPU time throttled so far.
type MemorySample struct {
	At                time.Time `json:"at"`
	UsageBytes        uint64    `json:"usageBytes"`
	CPUThrottledNanos uint64    `json:"cpuThrottledNanos,omitempty"`
}

// MessageCount is one kind of message an actor received lately and how
// many times.
type MessageCount struct {
	Kind  string `json:"kind"`
	Count uint64 `json:"count"`
}

// ActorStats is one live actor's counters.
type ActorStats struct {
	MailboxDepth int64  `json:"mailboxDepth"`
	MessagesIn   uint64 `json:"messagesIn"`
	MessagesOut  uint64 `json:"messagesOut"`
	Restarts     uint64 `json:"restarts"`
	// Recent are the kinds (Go types) of the messages it received lately,
	// each once with its count, least recently seen first; the console's
	// own polling (Inspect, SnapshotRequest) is left out.
	Recent []MessageCount `json:"recent"`
}

// AttemptView is one attempt in the console: its summary and its phase
// timeline.
type AttemptView struct {
	AttemptSummary
	Timeline []PhaseSpan `json:"timeline"`
}

// PhaseSpan is one phase of an attempt's timeline; Seconds is 0 while the
// phase lasts.
type PhaseSpan struct {
	Phase   string    `json:"phase"`
	Start   time.Time `json:"start"`
	Seconds float64   `json:"seconds"`
}

// FleetDirectory is the body of GET /v1/fleet: the fleet as this daemon,
// one of its members, sees it (docs/fleet.md). A daemon running alone
// answers Member false and no members.
type FleetDirectory struct {
	Member bool `json:"member"`
	// Fleet is the fleet's name, RunnerID this member's runner id.
	Fleet    string `json:"fleet,omitempty"`
	RunnerID string `json:"runnerId,omitempty"`
	// Members are the members the cluster lists (from etcd), this one
	// included, each as it answered.
	Members []FleetMember `json:"members"`
}

// FleetMember is one member's entry of the directory: its capacity, its
// running attempts and whether it admits work. A listed member that did
// not answer has only Address, MemberID and Error.
type FleetMember struct {
	RunnerID string `json:"runnerId,omitempty"`
	// Address is its cluster address; MemberID the cluster's id of it
	// (random per process).
	Address  string `json:"address"`
	MemberID string `json:"memberId,omitempty"`
	// Slots, and those neither running, starting nor queued.
	Slots     int      `json:"slots"`
	FreeSlots int      `json:"freeSlots"`
	Active    int      `json:"active"`
	Starting  int      `json:"starting"`
	Queued    int      `json:"queued"`
	Attempts  []string `json:"attempts"`
	// Draining: it admits no new work (stopping, or cut off from etcd).
	Draining bool `json:"draining"`
	// CutOff: it has not reached etcd for the membership TTL.
	CutOff               bool   `json:"cutOff"`
	PreflightAvailable   bool   `json:"preflightAvailable"`
	PreflightCode        string `json:"preflightCode,omitempty"`
	PreflightReason      string `json:"preflightReason,omitempty"`
	MemoryAvailableBytes int64  `json:"memoryAvailableBytes"`
	CPUAvailableMillis   int    `json:"cpuAvailableMillis"`
	DiskFreeBytes        int64  `json:"diskFreeBytes"`
	DiskLow              bool   `json:"diskLow"`
	// Headroom is what one more attempt may reserve there now (its
	// Snapshot.Headroom), by which placement weighs a dispatch; nil when
	// its budget is unknown.
	Headroom *Reservation `json:"headroom,omitempty"`
	// RunnerInstanceID is its runner instance id (random per process).
	RunnerInstanceID string `json:"runnerInstanceId,omitempty"`
	// UpdatedAt is when the member read its state.
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	// Error says why it did not answer.
	Error string `json:"error,omitempty"`
	// Repositories is what repositories it serves (nil when it did not
	// answer).
	Repositories *Repositories `json:"repositories,omitempty"`
	// Services are the catalogue services whose image the member's engine
	// holds; Toolchains the toolchain images it holds (its preflight).
	Services   []FleetImage `json:"services,omitempty"`
	Toolchains []FleetImage `json:"toolchains,omitempty"`
}

// FleetImage is an image a fleet member holds: a service or toolchain
// name, its reference and its id.
type FleetImage struct {
	Name    string `json:"name"`
	Ref     string `json:"ref,omitempty"`
	ImageID string `json:"imageId,omitempty"`
}
