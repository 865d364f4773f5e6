package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/kit/text"
)

// MaxDispatchBytes bounds an encoded dispatch.
const MaxDispatchBytes = 256 * 1024

// Resource bounds a dispatch may request.
const (
	MinWorkerMemoryBytes  = 64 << 20
	MaxWorkerMemoryBytes  = 256 << 30
	MinCPUMillis          = 100
	MaxCPUMillis          = 256_000
	MinPIDs               = 16
	MaxPIDs               = 65_536
	MaxServiceMemoryBytes = 256 << 30
	MaxRuntimeOverhead    = 64 << 30
	// MinWorkspaceBytes and MaxWorkspaceBytes bound a dispatch's
	// workspaceBytes; DefaultWorkspaceBytes is the workspace of a dispatch
	// that names none.
	MinWorkspaceBytes      = 64 << 20
	DefaultWorkspaceBytes  = 4 << 30
	MaxWorkspaceBytes      = 64 << 30
	MaxTaskArgs            = 256
	MaxTaskArgBytes        = 64 * 1024
	MaxTaskTimeoutSeconds  = 8 * 60 * 60
	MaxCommitMessageBytes  = 16 * 1024
	DefaultTaskTimeoutSecs = 60 * 60
)

var (
	fullUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	fullSHA  = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	repoName = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,120}$`)
	grantID  = regexp.MustCompile(`^[0-9a-f-]{32,36}$`)
	hostName = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)
)

// IsFullUUID reports whether s is a lowercase, hyphenated, full UUID.
func IsFullUUID(s string) bool { return fullUUID.MatchString(s) }

// IsFullSHA reports whether s is a full lowercase SHA-1 or SHA-256 object id.
func IsFullSHA(s string) bool { return fullSHA.MatchString(s) }

// DecodeDispatch strictly decodes and validates one dispatch. Unknown
// fields, trailing data, non-UUID ids, bad timestamps and out-of-range
// resources are refused with failure.DispatchInvalid and a message naming
// the field.
func DecodeDispatch(r io.Reader) (*Dispatch, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxDispatchBytes+1))
	if err != nil {
		return nil, failure.Wrap(failure.DispatchInvalid, err, "read dispatch")
	}
	if len(raw) > MaxDispatchBytes {
		return nil, failure.New(failure.DispatchInvalid, "dispatch exceeds %d bytes", MaxDispatchBytes)
	}
	var d Dispatch
	if err := strictjson.Decode(raw, &d); errors.Is(err, strictjson.ErrTrailingData) {
		return nil, failure.New(failure.DispatchInvalid, "there is data after the dispatch's JSON object: send exactly one object")
	} else if err != nil {
		// The sentence says it all; the decoder's own words stay the cause.
		return nil, failure.WrapWithheld(failure.DispatchInvalid, err, "%s", describeJSONError(err))
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// describeJSONError turns a decoding error into one sentence that names
// the field (where the decoder knows it) and says what to do.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	msg := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case errors.Is(err, io.EOF):
		return "the dispatch is empty: send one JSON object (docs/dispatch-and-api.md)"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the dispatch's JSON ends early: send one complete object"
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Sprintf("field %s must be a JSON %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Sprintf("the dispatch must be a JSON object, not %s", typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("the dispatch is not valid JSON at byte %d (%s): fix the document", syntaxErr.Offset, msg)
	case errors.As(err, &timeErr):
		return fmt.Sprintf("timestamp %q is not RFC 3339: write it as 2030-01-02T15:04:05Z", text.Ellipsis(timeErr.Value, 64))
	case errors.Is(err, strictjson.ErrDuplicateKey):
		key := strings.TrimPrefix(err.Error(), strictjson.ErrDuplicateKey.Error()+": ")
		return fmt.Sprintf("key %s appears twice in one object (keys are compared without case): keep one", text.Ellipsis(key, 64))
	case strings.HasPrefix(msg, "unknown field "):
		return fmt.Sprintf("field %s is not part of a dispatch: remove it (docs/dispatch-and-api.md lists the fields)",
			text.Ellipsis(strings.TrimPrefix(msg, "unknown field "), 64))
	default:
		return text.Ellipsis(msg, 200)
	}
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}

// validateLocation checks that the repository is named exactly one way:
// a clean absolute repo.localPath, or a repo.remote URL remoteurl accepts.
func (r RepoRef) validateLocation() error {
	switch {
	case r.LocalPath != "" && r.Remote != "":
		return fieldError("repo", "names both localPath and remote; name exactly one")
	case r.Remote != "":
		if _, err := remoteurl.Parse(r.Remote); err != nil {
			return fieldError("repo.remote", "%v", err)
		}
		return nil
	case r.LocalPath == "" || !filepath.IsAbs(r.LocalPath) || filepath.Clean(r.LocalPath) != r.LocalPath:
		return fieldError("repo.localPath", "must be a clean absolute path (or name repo.remote instead)")
	}
	return nil
}

func fieldError(field, format string, args ...any) error {
	return failure.New(failure.DispatchInvalid, "field %s: %s", field, fmt.Sprintf(format, args...))
}

// Validate checks every field of the dispatch. It is called by
// DecodeDispatch and may be called on dispatches built in code.
func (d *Dispatch) Validate() error {
	ids := []struct{ field, value string }{
		{"session.id", d.Session.ID},
		{"execution.runnerId", d.Execution.RunnerID},
		{"lease.fencingToken", d.Lease.FencingToken},
		{"sandbox.dispatchAttemptId", d.Sandbox.DispatchAttemptID},
		{"sandbox.executionLeaseId", d.Sandbox.ExecutionLeaseID},
		{"sandbox.runnerInstanceId", d.Sandbox.RunnerInstanceID},
	}
	for _, id := range ids {
		if !IsFullUUID(id.value) {
			return fieldError(id.field, "must be a full lowercase UUID, got %q", text.Ellipsis(id.value, 64))
		}
	}
	if err := d.Execution.validateProvider(); err != nil {
		return err
	}
	if !repoName.MatchString(d.Repo.Name) {
		return fieldError("repo.name", "must be 1-120 characters of [A-Za-z0-9._/-]")
	}
	if err := d.Repo.validateLocation(); err != nil {
		return err
	}
	if err := validateBranch("repo.defaultBranch", d.Repo.DefaultBranch); err != nil {
		return err
	}
	if d.BaseBranch != "" {
		if err := validateBranch("baseBranch", d.BaseBranch); err != nil {
			return err
		}
	}
	if err := validateBranch("lease.worktreeKey", d.Lease.WorktreeKey); err != nil {
		return err
	}
	base := d.BaseBranch
	if base == "" {
		base = d.Repo.DefaultBranch
	}
	switch d.Lease.WorktreeKey {
	case d.Repo.DefaultBranch:
		return fieldError("lease.worktreeKey", "is the repository's default branch, which forged never moves")
	case base:
		return fieldError("lease.worktreeKey", "is the base branch, which forged never moves")
	}
	if d.Lease.ExpiresAt.IsZero() {
		return fieldError("lease.expiresAt", "is required (RFC 3339)")
	}
	switch d.Sandbox.ExecutionPolicy {
	case PolicySandboxRequired, PolicyAdoption:
	default:
		return fieldError("sandbox.executionPolicy", "must be %q or %q", PolicySandboxRequired, PolicyAdoption)
	}
	switch d.Sandbox.Isolation {
	case "", IsolationRunc, IsolationGVisor:
	default:
		return fieldError("sandbox.isolation", "must be %q or %q when present", IsolationRunc, IsolationGVisor)
	}
	if sha := d.Sandbox.SandboxConfigCommitSHA; sha != "" && !IsFullSHA(sha) {
		return fieldError("sandbox.sandboxConfigCommitSha", "must be a full lowercase object id")
	}
	if err := d.Sandbox.NetworkPolicy.validate(); err != nil {
		return err
	}
	if err := d.Sandbox.RequestedResources.validate(); err != nil {
		return err
	}
	switch d.Sandbox.PublicationMode {
	case PublicationNone:
		if d.Sandbox.PublishGrant != nil {
			return fieldError("sandbox.publishGrantHandle", "must be absent unless publicationMode is %q", PublicationBridgePush)
		}
	case PublicationBridgePush:
		g := d.Sandbox.PublishGrant
		switch {
		case g == nil:
			return fieldError("sandbox.publishGrantHandle", "is required for %q", PublicationBridgePush)
		case !grantID.MatchString(g.GrantID):
			return fieldError("sandbox.publishGrantHandle.grantId", "must be 32-36 characters of [0-9a-f-]")
		case g.Branch != d.Lease.WorktreeKey:
			return fieldError("sandbox.publishGrantHandle.branch", "must be the lease's worktree key %q", d.Lease.WorktreeKey)
		}
	default:
		return fieldError("sandbox.publicationMode", "must be %q or %q", PublicationNone, PublicationBridgePush)
	}
	return d.Task.validate()
}

func validateBranch(field, name string) error {
	if !ValidBranch(name) {
		return fieldError(field, "is not a valid branch name")
	}
	return nil
}

func (p NetworkPolicy) validate() error {
	switch p.Mode {
	case NetworkNone, NetworkOpenPublic:
		if len(p.AllowedHosts) != 0 {
			return fieldError("sandbox.networkPolicy.allowedHosts", "must be empty for mode %q", p.Mode)
		}
	case NetworkPublicAllowlist:
		if len(p.AllowedHosts) == 0 || len(p.AllowedHosts) > 128 {
			return fieldError("sandbox.networkPolicy.allowedHosts", "must list 1-128 hosts")
		}
		for i, h := range p.AllowedHosts {
			if !hostName.MatchString(h) {
				return fieldError(fmt.Sprintf("sandbox.networkPolicy.allowedHosts[%d]", i), "is not a host name")
			}
		}
	default:
		return fieldError("sandbox.networkPolicy.mode", "must be %q, %q or %q", NetworkNone, NetworkPublicAllowlist, NetworkOpenPublic)
	}
	return nil
}

func (r RequestedResources) validate() error {
	workspace := r.WorkspaceBytes
	if workspace == 0 {
		workspace = DefaultWorkspaceBytes
	}
	checks := []struct {
		field    string
		value    int64
		min, max int64
	}{
		{"sandbox.requestedResources.workerMemoryLimitBytes", r.WorkerMemoryLimitBytes, MinWorkerMemoryBytes, MaxWorkerMemoryBytes},
		{"sandbox.requestedResources.cpuMillis", r.CPUMillis, MinCPUMillis, MaxCPUMillis},
		{"sandbox.requestedResources.pids", r.PIDs, MinPIDs, MaxPIDs},
		{"sandbox.requestedResources.serviceMemoryLimitBytes", r.ServiceMemoryLimitBytes, 0, MaxServiceMemoryBytes},
		{"sandbox.requestedResources.runtimeOverheadBytes", r.RuntimeOverheadBytes, 0, MaxRuntimeOverhead},
		{"sandbox.requestedResources.workspaceBytes", workspace, MinWorkspaceBytes, MaxWorkspaceBytes},
	}
	for _, c := range checks {
		if c.value < c.min || c.value > c.max {
			return fieldError(c.field, "%d is outside [%d, %d]", c.value, c.min, c.max)
		}
	}
	return nil
}

func (t Task) validate() error {
	if len(t.Argv) == 0 || len(t.Argv) > MaxTaskArgs {
		return fieldError("task.argv", "must have 1-%d arguments", MaxTaskArgs)
	}
	for i, a := range t.Argv {
		if len(a) > MaxTaskArgBytes || strings.ContainsRune(a, 0) {
			return fieldError(fmt.Sprintf("task.argv[%d]", i), "must be at most %d bytes without NUL", MaxTaskArgBytes)
		}
	}
	if t.Argv[0] == "" {
		return fieldError("task.argv[0]", "must not be empty")
	}
	if t.TimeoutSeconds < 0 || t.TimeoutSeconds > MaxTaskTimeoutSeconds {
		return fieldError("task.timeoutSeconds", "%d is outside [0, %d]", t.TimeoutSeconds, MaxTaskTimeoutSeconds)
	}
	return t.ValidateResult()
}

// ValidateResult checks the task's result options: the commit message is
// at most MaxCommitMessageBytes of valid UTF-8 without NUL and not blank
// when present, and the result mode is history, squash or absent. The
// worker applies the same rules to its start packet.
func (t Task) ValidateResult() error {
	if m := t.CommitMessage; m != "" && (len(m) > MaxCommitMessageBytes || !utf8.ValidString(m) ||
		strings.ContainsRune(m, 0) || strings.TrimSpace(m) == "") {
		return fieldError("task.commitMessage", "must be at most %d bytes of UTF-8 text without NUL, and not blank", MaxCommitMessageBytes)
	}
	switch t.ResultMode {
	case "", ResultHistory, ResultSquash:
	default:
		return fieldError("task.resultMode", "must be %q or %q", ResultHistory, ResultSquash)
	}
	return nil
}

// ValidateManagedRef checks the dispatch's worktree key against the
// operator's managed namespace ns (a "refs/heads/…/" prefix; empty means
// refs/heads/forge/): the managed branch must lie below it.
// A refusal is failure.DispatchInvalid.
func (d *Dispatch) ValidateManagedRef(ns string) error {
	if ns == "" {
		ns = DefaultManagedNamespace
	}
	ref := "refs/heads/" + d.Lease.WorktreeKey
	if !strings.HasPrefix(ref, ns) || len(ref) == len(ns) {
		return fieldError("lease.worktreeKey", "%q is outside the managed namespace %s", text.Ellipsis(d.Lease.WorktreeKey, 64), ns)
	}
	return nil
}

// DefaultManagedNamespace is where managed branches live unless the
// operator configures another namespace.
const DefaultManagedNamespace = "refs/heads/forge/"

// ValidManagedNamespace reports whether ns can be a managed namespace:
// refs/heads/ followed by a valid branch-name prefix ending in "/".
func ValidManagedNamespace(ns string) bool {
	rest, ok := strings.CutPrefix(ns, "refs/heads/")
	if !ok || !strings.HasSuffix(rest, "/") {
		return false
	}
	return validateBranch("", strings.TrimSuffix(rest, "/")) == nil
}

// providerName is a provider or auth kind name: 1-64 characters of
// [a-z0-9_-], starting with a letter or digit.
var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// validateProvider checks execution.provider and execution.authKind: both
// or neither, each a provider name; and execution.credentialMount, only
// with them, at a path ValidateCredentialMountPath admits.
func (e ExecutionRef) validateProvider() error {
	switch {
	case e.Provider == "" && e.AuthKind == "" && e.CredentialMount != nil:
		return fieldError("execution.credentialMount", "needs execution.provider and execution.authKind")
	case e.Provider == "" && e.AuthKind == "":
		return nil
	case e.Provider == "":
		return fieldError("execution.provider", "is required with execution.authKind")
	case e.AuthKind == "":
		return fieldError("execution.authKind", "is required with execution.provider")
	case !providerName.MatchString(e.Provider):
		return fieldError("execution.provider", "must be 1-64 characters of [a-z0-9_-]")
	case !providerName.MatchString(e.AuthKind):
		return fieldError("execution.authKind", "must be 1-64 characters of [a-z0-9_-]")
	case e.CredentialMount != nil:
		return ValidateCredentialMountPath(e.CredentialMount.Path)
	}
	return nil
}
