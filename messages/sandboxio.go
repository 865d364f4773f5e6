package messages

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/forgedev/forged/internal/kit/text"
)

// The types in this file cross the sandbox boundary: the host writes a
// StartPacket to the worker's stdin; the worker writes a Manifest, a
// ResultPacket and (when it committed) a git bundle into /control/output and
// streams RunnerEventLine JSON lines on stdout. Everything the worker
// produces is untrusted and validated on the host.

// Paths inside the worker container. WorkerBinaryPath is where the
// forged-worker binary lies in every agent image; its name and the "worker"
// first argument of every in-container command line stay those of the time
// the daemon itself was the worker, so that containers adopted across an
// upgrade keep answering the same command lines.
const (
	WorkspaceDir     = "/workspace"
	ControlDir       = "/control"
	InputBundlePath  = "/control/input/repo.bundle"
	OutputDir        = "/control/output"
	LeaseUpdatePath  = "/run/forge/lease-update.json"
	WorkerBinaryPath = "/opt/forge/forged"
	WorkerUID        = 10001
	WorkerGID        = 10001
)

// The worker's stdout budget, counted alike on both sides: in the bytes of
// the signed event lines (messages.SignEventLine) the worker writes, not in
// the task's content (a one-byte line costs about 250 bytes on the wire).
// The worker forwards the task's output lines only while the task_output
// lines it wrote stay within TaskOutputBudgetBytes, and drops the rest; its
// own events are bounded apart and fit in WorkerEventReserveBytes (at most
// one task_active event every 20 s of an 8 h run, the fixed lifecycle
// events, a bounded commit list). The host's capture bound on the worker's
// stdout is the sum: an honest task never meets it, only lines the task
// writes past the worker (into /proc/1/fd/1) can, and then the attempt
// fails with sandbox_log_limit.
const (
	TaskOutputBudgetBytes   = 8 << 20
	WorkerEventReserveBytes = 2 << 20
	WorkerStdoutBudgetBytes = TaskOutputBudgetBytes + WorkerEventReserveBytes
)

// ReleaseSignal is the signal the host sends the worker container (its
// init forwards it to the worker) once it has taken its last reading:
// see StartPacket.ReleaseWaitMillis.
const ReleaseSignal = "SIGUSR1"

// The task's HOME and TMPDIR inside the worker container: two sized,
// executable tmpfs mounts (see dockerops.WorkerContainerConfig).
const (
	HomeDir = "/home/forge"
	TempDir = "/tmp"
)

// Output file names written by the worker into OutputDir.
const (
	ManifestFile     = "manifest.json"
	ResultFile       = "result.json"
	ResultBundleFile = "result.bundle"
)

// StartPacketSchema is the version of StartPacket.
const StartPacketSchema = 1

// SandboxIdentity is the identity and fence of one attempt, as the worker
// must echo it in its manifest.
type SandboxIdentity struct {
	DispatchAttemptID string `json:"dispatchAttemptId"`
	ExecutionLeaseID  string `json:"executionLeaseId"`
	FencingToken      string `json:"fencingToken"`
	RunnerInstanceID  string `json:"runnerInstanceId"`
	InputCommitSHA    string `json:"inputCommitSha"`
	Branch            string `json:"branch"`
	ContractDigest    string `json:"contractDigest"`
	ImageDigest       string `json:"imageDigest"`
}

// StartPacket is what the host writes to the worker's stdin (one JSON
// document, then EOF).
type StartPacket struct {
	SchemaVersion int             `json:"schemaVersion"`
	Identity      SandboxIdentity `json:"identity"`
	Task          Task            `json:"task"`
	// WorkingDirectory is the contract's working directory (absolute, under
	// WorkspaceDir); the task runs there.
	WorkingDirectory string    `json:"workingDirectory"`
	LeaseExpiresAt   time.Time `json:"leaseExpiresAt"`
	LeaseControlKey  string    `json:"leaseControlKey"`
	// TaskTimeoutSeconds bounds the task's run time inside the worker: the
	// attempt's hard wall (package timelimit).
	TaskTimeoutSeconds int `json:"taskTimeoutSeconds"`
	// IdleTimeoutSeconds stops a task that writes no output for that long;
	// 0 means no idle limit.
	IdleTimeoutSeconds int `json:"idleTimeoutSeconds,omitempty"`
	// ReleaseWaitMillis, when positive, makes the worker wait that long
	// after writing its output for the host's release (ReleaseSignal),
	// so that the host takes its last reading of the container's cgroup
	// while it still exists.
	ReleaseWaitMillis int `json:"releaseWaitMillis,omitempty"`
	// Services are the connection details of the attempt's ready
	// services. The password never travels here: only the path of its
	// file in the read-only secrets volume.
	Services []ServiceEndpoint `json:"services,omitempty"`
}

// ServiceEndpoint is how the task reaches one service on the attempt
// network.
type ServiceEndpoint struct {
	Type         string `json:"type"`
	Host         string `json:"host"`
	Port         int    `json:"port"`
	User         string `json:"user,omitempty"`
	Database     string `json:"database,omitempty"`
	PasswordFile string `json:"passwordFile,omitempty"`
}

// OutputFile describes one file in OutputDir: a bare file name, its size and
// its lowercase hex sha256.
type OutputFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Manifest is the worker's account of its output. ResultCommitSHA and Bundle
// are both nil when the task changed nothing.
type Manifest struct {
	SandboxIdentity
	ResultCommitSHA *string     `json:"resultCommitSha"`
	Bundle          *OutputFile `json:"bundle"`
	Result          OutputFile  `json:"result"`
}

// ResultPacket is the worker's result.json.
type ResultPacket struct {
	SchemaVersion   int     `json:"schemaVersion"`
	ExitCode        int     `json:"exitCode"`
	TaskExitCode    int     `json:"taskExitCode"`
	Summary         string  `json:"summary"`
	ResultCommitSHA *string `json:"resultCommitSha"`
}

// RunnerEventLine is one stdout line of the worker: {"type":"runner_event","event":{...}}.
type RunnerEventLine struct {
	Type  string `json:"type"`
	Event Event  `json:"event"`
}

// RunnerEventType is the Type of a RunnerEventLine.
const RunnerEventType = "runner_event"

// ServiceEnv is the environment a task gets for its services: FORGE_<S>_*
// for each (HOST, PORT, USER, DATABASE, PASSWORD_FILE), plus the variables
// client libraries read directly (PGHOST, PGPORT, PGUSER, PGDATABASE;
// REDIS_HOST, REDIS_PORT). Never a password: only the path of its file.
func ServiceEnv(endpoints []ServiceEndpoint) []string {
	var env []string
	for _, e := range endpoints {
		p := "FORGE_" + strings.ToUpper(e.Type) + "_"
		port := strconv.Itoa(e.Port)
		env = append(env, p+"HOST="+e.Host, p+"PORT="+port)
		if e.PasswordFile != "" {
			env = append(env, p+"PASSWORD_FILE="+e.PasswordFile)
		}
		if e.User != "" {
			env = append(env, p+"USER="+e.User)
		}
		if e.Database != "" {
			env = append(env, p+"DATABASE="+e.Database)
		}
		switch e.Type {
		case "postgres":
			env = append(env, "PGHOST="+e.Host, "PGPORT="+port, "PGUSER="+e.User, "PGDATABASE="+e.Database)
		case "redis":
			env = append(env, "REDIS_HOST="+e.Host, "REDIS_PORT="+port)
		case "browser":
			env = append(env, p+"URL=http://"+e.Host+":"+port)
		}
	}
	return env
}

// MaxReportedCommits bounds the commits an event or outcome lists.
const MaxReportedCommits = 20

// maxSubjectBytes bounds a reported commit subject.
const maxSubjectBytes = 200

// ResultCommit is one commit of a result as reported: its id and the
// subject line of its message (printable and bounded, see BoundedSubject).
type ResultCommit struct {
	SHA     string `json:"sha"`
	Subject string `json:"subject"`
}

// BoundedSubject makes a commit subject safe to report: invalid UTF-8 and
// control characters become "?" and spaces, and it is cut to 200 bytes on
// a rune boundary.
func BoundedSubject(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	return text.Ellipsis(strings.TrimSpace(s), maxSubjectBytes)
}
