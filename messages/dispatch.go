// Package messages holds the typed messages exchanged by forged's actors,
// the dispatch that starts an attempt (with its strict decoder), the
// attempt's event type, and the documents that cross the sandbox boundary
// (start packet, manifest, result packet).
package messages

import "time"

// Execution policies.
const (
	PolicySandboxRequired = "sandbox_required"
	PolicyAdoption        = "adoption"
)

// Network policy modes.
const (
	NetworkNone            = "none"
	NetworkPublicAllowlist = "public_allowlist"
	NetworkOpenPublic      = "open_public"
)

// Publication modes.
const (
	PublicationNone       = "none"
	PublicationBridgePush = "bridge_push"
)

// Dispatch is one sandbox attempt as the server hands it to a runner.
type Dispatch struct {
	Session    SessionRef   `json:"session"`
	Execution  ExecutionRef `json:"execution"`
	Repo       RepoRef      `json:"repo"`
	BaseBranch string       `json:"baseBranch"`
	Lease      Lease        `json:"lease"`
	Sandbox    SandboxSpec  `json:"sandbox"`
	Task       Task         `json:"task"`
}

// SessionRef names the agent session the attempt belongs to.
type SessionRef struct {
	ID string `json:"id"`
}

// ExecutionRef names the runner the attempt was dispatched to.
type ExecutionRef struct {
	RunnerID string `json:"runnerId"`
	// Provider and AuthKind choose the provider auth adapter that prepares
	// the agent's model-provider credentials (both or neither).
	Provider string `json:"provider,omitempty"`
	AuthKind string `json:"authKind,omitempty"`
	// CredentialMount, with Provider, chooses where the credential files
	// are mounted and whether they are writable; nil keeps them read-only
	// in the secrets volume at /run/forge-secrets.
	CredentialMount *CredentialMount `json:"credentialMount,omitempty"`
}

// RepoRef is the repository the attempt works on: exactly one of
// LocalPath (a repository on the runner's host, under its --repo-root) and
// Remote (a URL the runner fetches into a mirror of its own, when its
// operator allows the URL's protocol with --remote-protocols).
type RepoRef struct {
	Name      string `json:"name"`
	LocalPath string `json:"localPath,omitempty"`
	// Remote is a git URL (see package internal/kit/remoteurl for what is
	// accepted); the attempt runs from the member's mirror of it, where
	// the managed branch lives too (docs/dispatch-and-api.md).
	Remote        string `json:"remote,omitempty"`
	DefaultBranch string `json:"defaultBranch"`
}

// Lease is the attempt's execution lease: the managed branch (worktree key),
// its expiry and the fencing token that orders attempts on it.
type Lease struct {
	WorktreeKey  string    `json:"worktreeKey"`
	ExpiresAt    time.Time `json:"expiresAt"`
	FencingToken string    `json:"fencingToken"`
}

// SandboxSpec is the sandbox part of the dispatch.
type SandboxSpec struct {
	DispatchAttemptID      string             `json:"dispatchAttemptId"`
	ExecutionLeaseID       string             `json:"executionLeaseId"`
	RunnerInstanceID       string             `json:"runnerInstanceId"`
	ExecutionPolicy        string             `json:"executionPolicy"`
	SandboxConfigCommitSHA string             `json:"sandboxConfigCommitSha,omitempty"`
	NetworkPolicy          NetworkPolicy      `json:"networkPolicy"`
	RequestedResources     RequestedResources `json:"requestedResources"`
	PublicationMode        string             `json:"publicationMode"`
	// Isolation is the isolation the dispatch asks for: IsolationRunc or
	// IsolationGVisor; "" is the runner's floor. It can never be less
	// than the floor (refused with failure.SandboxIsolationBelowFloor).
	Isolation string `json:"isolation,omitempty"`
	// PublishGrant names the server's publication grant; required for
	// bridge_push, absent otherwise.
	PublishGrant *PublishGrant `json:"publishGrantHandle,omitempty"`
}

// PublishGrant is the handle of a publication grant the runner redeems for
// a short-lived credential after the result is imported.
type PublishGrant struct {
	GrantID string `json:"grantId"`
	Branch  string `json:"branch"`
}

// NetworkPolicy says what the sandbox may reach.
type NetworkPolicy struct {
	Mode         string   `json:"mode"`
	AllowedHosts []string `json:"allowedHosts,omitempty"`
}

// RequestedResources is what one attempt reserves on the host.
type RequestedResources struct {
	WorkerMemoryLimitBytes  int64 `json:"workerMemoryLimitBytes"`
	CPUMillis               int64 `json:"cpuMillis"`
	PIDs                    int64 `json:"pids"`
	ServiceMemoryLimitBytes int64 `json:"serviceMemoryLimitBytes"`
	RuntimeOverheadBytes    int64 `json:"runtimeOverheadBytes"`
	// WorkspaceBytes is the size of the attempt's workspace filesystem
	// (/workspace). Absent or 0 means DefaultWorkspaceBytes; at most
	// MaxWorkspaceBytes. Writing past it fails the attempt with
	// sandbox_storage_exhausted.
	WorkspaceBytes int64 `json:"workspaceBytes,omitempty"`
}

// Reservation is what one admitted attempt holds against its host's
// budget until it finishes: the memory it requested (worker + services +
// runtime overhead) and its CPU millis. The supervisor admits by it, and a
// fleet places by it (internal/fleet), so both weigh a dispatch alike.
func (r RequestedResources) Reservation() Reservation {
	return Reservation{MemoryBytes: r.WorkerMemoryLimitBytes + r.ServiceMemoryLimitBytes + r.RuntimeOverheadBytes, CPUMillis: r.CPUMillis}
}

// Reservation is an amount of a host's budget: memory and CPU millis.
type Reservation struct {
	MemoryBytes int64 `json:"memoryBytes"`
	CPUMillis   int64 `json:"cpuMillis"`
}

// Plus is the sum of two reservations.
func (h Reservation) Plus(o Reservation) Reservation {
	return Reservation{MemoryBytes: h.MemoryBytes + o.MemoryBytes, CPUMillis: h.CPUMillis + o.CPUMillis}
}

// Holds reports whether n fits in h (h a headroom: what is left of a
// budget), resource by resource.
func (h Reservation) Holds(n Reservation) bool {
	return n.MemoryBytes <= h.MemoryBytes && n.CPUMillis <= h.CPUMillis
}

// Workspace returns WorkspaceBytes, or DefaultWorkspaceBytes when unset.
func (r RequestedResources) Workspace() int64 {
	if r.WorkspaceBytes <= 0 {
		return DefaultWorkspaceBytes
	}
	return r.WorkspaceBytes
}

// Result modes: how the task's work becomes the result.
const (
	// ResultHistory keeps the task's own commits (its branch, when it
	// descends from the input), plus one commit of whatever it left
	// uncommitted. The default.
	ResultHistory = "history"
	// ResultSquash ignores the task's commits: the result is one commit of
	// the working tree on top of the input.
	ResultSquash = "squash"
)

// Task is what the worker runs inside the sandbox, in the contract's
// working directory.
type Task struct {
	Argv           []string `json:"argv"`
	TimeoutSeconds int      `json:"timeoutSeconds,omitempty"`
	// CommitMessage is the message of the commit the worker makes of the
	// task's uncommitted changes (squash: of the whole result); empty means
	// "forge: result of attempt <id>".
	CommitMessage string `json:"commitMessage,omitempty"`
	// ResultMode is ResultHistory (empty means it) or ResultSquash.
	ResultMode string `json:"resultMode,omitempty"`
}

// Squash reports whether the task asked for a squashed result.
func (t Task) Squash() bool { return t.ResultMode == ResultSquash }

// AttemptID returns the dispatch attempt id, the attempt's identity.
func (d *Dispatch) AttemptID() string { return d.Sandbox.DispatchAttemptID }
