package messages

import (
	"path"
	"strings"
)

// CredentialsDir is the sandbox's own root for provider credentials that
// are mounted somewhere other than the default read-only secrets
// directory (/run/forge-secrets).
const CredentialsDir = "/run/forge-credentials"

// maxCredentialMountPath bounds execution.credentialMount.path.
const maxCredentialMountPath = 256

// CredentialMount is where the provider auth adapter's credential files
// are mounted in the sandbox, as the seed's adapter chooses its
// containerMountPath, and whether the task may rewrite them (the seed's
// adapter.writable: CLIs that refresh their tokens in place).
type CredentialMount struct {
	// Path is clean and absolute, strictly under HomeDir or at or under
	// CredentialsDir.
	Path string `json:"path"`
	// Writable mounts the attempt's own credentials volume read-write.
	// What the task writes there is discarded with the volume at
	// teardown: it is never imported, read back or trusted.
	Writable bool `json:"writable,omitempty"`
}

// ValidateCredentialMountPath refuses a credential mount path that is not
// clean and absolute, or that is not strictly under the sandbox's HOME
// (HomeDir) or at or under CredentialsDir: the workspace, the control
// directory, the secrets directory and every system directory are out.
func ValidateCredentialMountPath(p string) error {
	const field = "execution.credentialMount.path"
	switch {
	case p == "":
		return fieldError(field, "is required with execution.credentialMount")
	case len(p) > maxCredentialMountPath:
		return fieldError(field, "must be at most %d characters", maxCredentialMountPath)
	case !validMountPathChars(p):
		return fieldError(field, "must be characters of [A-Za-z0-9._/-]")
	case !path.IsAbs(p) || path.Clean(p) != p:
		return fieldError(field, "must be a clean absolute path (no '.', '..', '//' or trailing '/')")
	case !strings.HasPrefix(p, HomeDir+"/") && p != CredentialsDir && !strings.HasPrefix(p, CredentialsDir+"/"):
		return fieldError(field, "%q must be under %s/ or %s: the workspace, control, secrets and system directories are refused", p, HomeDir, CredentialsDir)
	}
	return nil
}

func validMountPathChars(p string) bool {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '/') {
			return false
		}
	}
	return true
}
