package worker

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// MaxStartPacketBytes bounds the start packet read from stdin.
const MaxStartPacketBytes = 1 << 20

// Bounds of the free-form identity fields the worker only echoes.
const (
	maxDigestBytes     = 512
	maxControlKeyBytes = 1024
)

var (
	sha1Hex = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// readStartPacket reads, strictly decodes and validates the start packet.
// Unknown fields, trailing data and out-of-range values are refused.
func readStartPacket(r io.Reader, cfg Config) (*messages.StartPacket, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxStartPacketBytes+1))
	if err != nil {
		return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "read start packet")
	}
	if len(raw) > MaxStartPacketBytes {
		return nil, failure.New(failure.SandboxWorkerFailed, "start packet exceeds %d bytes", MaxStartPacketBytes)
	}
	var p messages.StartPacket
	if err := strictjson.Decode(raw, &p); err != nil {
		return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "decode start packet")
	}
	if err := validateStartPacket(&p, cfg.WorkspaceDir); err != nil {
		return nil, err
	}
	return &p, nil
}

// validateStartPacket checks every field the worker relies on.
func validateStartPacket(p *messages.StartPacket, workspace string) error {
	if p.SchemaVersion != messages.StartPacketSchema {
		return failure.New(failure.SandboxWorkerFailed, "start packet schemaVersion %d is not %d",
			p.SchemaVersion, messages.StartPacketSchema)
	}
	if err := validateIdentity(p.Identity); err != nil {
		return err
	}
	if err := validateTask(p.Task); err != nil {
		return err
	}
	if p.TaskTimeoutSeconds < 0 || p.TaskTimeoutSeconds > messages.MaxTaskTimeoutSeconds {
		return contractError("taskTimeoutSeconds", "%d is outside [0, %d]", p.TaskTimeoutSeconds, messages.MaxTaskTimeoutSeconds)
	}
	if p.IdleTimeoutSeconds < 0 || p.IdleTimeoutSeconds > messages.MaxTaskTimeoutSeconds {
		return contractError("idleTimeoutSeconds", "%d is outside [0, %d]", p.IdleTimeoutSeconds, messages.MaxTaskTimeoutSeconds)
	}
	if p.ReleaseWaitMillis < 0 || p.ReleaseWaitMillis > maxReleaseWaitMillis {
		return contractError("releaseWaitMillis", "%d is outside [0, %d]", p.ReleaseWaitMillis, maxReleaseWaitMillis)
	}
	if p.LeaseExpiresAt.IsZero() {
		return contractError("leaseExpiresAt", "is required (RFC 3339)")
	}
	if len(p.LeaseControlKey) > maxControlKeyBytes {
		return contractError("leaseControlKey", "exceeds %d bytes", maxControlKeyBytes)
	}
	if _, err := workingDirRel(workspace, p.WorkingDirectory); err != nil {
		return err
	}
	return validateServices(p.Services)
}

// validateServices checks the services' connection details: they become
// the task's environment.
func validateServices(endpoints []messages.ServiceEndpoint) error {
	if len(endpoints) > 3 {
		return contractError("services", "lists %d services, at most 3", len(endpoints))
	}
	seen := map[string]bool{}
	for i, e := range endpoints {
		field := fmt.Sprintf("services[%d]", i)
		switch {
		case e.Type != "postgres" && e.Type != "redis" && e.Type != "browser", seen[e.Type]:
			return contractError(field+".type", "%q is not a distinct known service", e.Type)
		case e.Host != e.Type:
			return contractError(field+".host", "is not the service's alias")
		case e.Port < 1 || e.Port > 65535:
			return contractError(field+".port", "%d is not a port", e.Port)
		case !isPlainWord(e.User) || !isPlainWord(e.Database):
			return contractError(field, "user and database must be short plain words")
		case e.Type == "browser" && e.PasswordFile != "",
			e.Type != "browser" && (!strings.HasPrefix(e.PasswordFile, "/run/forge-secrets/") || strings.Contains(e.PasswordFile, "..")):
			return contractError(field+".passwordFile", "is not in the secrets volume")
		}
		seen[e.Type] = true
	}
	return nil
}

func isPlainWord(s string) bool {
	if len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func validateIdentity(id messages.SandboxIdentity) error {
	uuids := []struct{ field, value string }{
		{"identity.dispatchAttemptId", id.DispatchAttemptID},
		{"identity.executionLeaseId", id.ExecutionLeaseID},
		{"identity.fencingToken", id.FencingToken},
		{"identity.runnerInstanceId", id.RunnerInstanceID},
	}
	for _, u := range uuids {
		if !messages.IsFullUUID(u.value) {
			return identityError(u.field, "must be a full lowercase UUID")
		}
	}
	if !sha1Hex.MatchString(id.InputCommitSHA) {
		return identityError("identity.inputCommitSha", "must be a full lowercase SHA-1 object id")
	}
	if !messages.ValidBranch(id.Branch) {
		return identityError("identity.branch", "is not a valid branch name")
	}
	for _, f := range []struct{ field, value string }{
		{"identity.contractDigest", id.ContractDigest},
		{"identity.imageDigest", id.ImageDigest},
	} {
		if len(f.value) > maxDigestBytes || strings.IndexFunc(f.value, func(r rune) bool {
			return r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' '
		}) >= 0 {
			return identityError(f.field, "must be at most %d printable ASCII characters", maxDigestBytes)
		}
	}
	return nil
}

func validateTask(t messages.Task) error {
	if len(t.Argv) == 0 || len(t.Argv) > messages.MaxTaskArgs {
		return contractError("task.argv", "must have 1-%d arguments", messages.MaxTaskArgs)
	}
	for i, a := range t.Argv {
		if len(a) > messages.MaxTaskArgBytes || strings.ContainsRune(a, 0) {
			return contractError(fmt.Sprintf("task.argv[%d]", i), "must be at most %d bytes without NUL", messages.MaxTaskArgBytes)
		}
	}
	if t.Argv[0] == "" {
		return contractError("task.argv[0]", "must not be empty")
	}
	if t.TimeoutSeconds < 0 || t.TimeoutSeconds > messages.MaxTaskTimeoutSeconds {
		return contractError("task.timeoutSeconds", "%d is outside [0, %d]", t.TimeoutSeconds, messages.MaxTaskTimeoutSeconds)
	}
	if err := t.ValidateResult(); err != nil {
		return failure.Wrap(failure.SandboxContractInvalid, err, "start packet")
	}
	return nil
}

// workingDirRel checks that dir is a clean absolute path inside workspace
// (and not inside its .git) and returns it relative to the workspace.
func workingDirRel(workspace, dir string) (string, error) {
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return "", contractError("workingDirectory", "must be a clean absolute path")
	}
	rel, err := filepath.Rel(filepath.Clean(workspace), dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", contractError("workingDirectory", "must be inside the workspace %s", workspace)
	}
	if first, _, _ := strings.Cut(rel, "/"); first == ".git" {
		return "", contractError("workingDirectory", "must not be inside the workspace's .git")
	}
	return rel, nil
}

// taskTimeoutSeconds is the task's time budget: the packet's
// TaskTimeoutSeconds, else the task's own TimeoutSeconds, else the default.
func taskTimeoutSeconds(p *messages.StartPacket) int {
	switch {
	case p.TaskTimeoutSeconds > 0:
		return p.TaskTimeoutSeconds
	case p.Task.TimeoutSeconds > 0:
		return p.Task.TimeoutSeconds
	default:
		return messages.DefaultTaskTimeoutSecs
	}
}

func identityError(field, format string, args ...any) error {
	return failure.New(failure.SandboxIdentityInvalid, "start packet field %s: %s", field, fmt.Sprintf(format, args...))
}

func contractError(field, format string, args ...any) error {
	return failure.New(failure.SandboxContractInvalid, "start packet field %s: %s", field, fmt.Sprintf(format, args...))
}
