package dockerops

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// maxSeccompProfileBytes bounds an operator's seccomp profile.
const maxSeccompProfileBytes = 1 << 20

var lsmOptionPattern = regexp.MustCompile(`^(apparmor=[a-zA-Z0-9_.-]{1,128}|label=[a-zA-Z0-9_:,.-]{1,256})$`)

// ResolveSecurityOptions turns the operator's sandbox security settings
// into WorkerSpec.SecurityOpts. seccompProfilePath is an absolute host path
// to a JSON seccomp profile; the Engine API takes the profile's content,
// not its path, so it is read and compacted here ("seccomp=<json>").
// lsmOption is "apparmor=<profile>" or "label=<selinux options>". Both are
// optional except under the sandbox_required execution policy
// (failure.SandboxSecurityUnavailable). Malformed settings are
// failure.SandboxSecurityProfile.
func ResolveSecurityOptions(executionPolicy, seccompProfilePath, lsmOption string) ([]string, error) {
	seccomp := strings.TrimSpace(seccompProfilePath)
	lsm := strings.TrimSpace(lsmOption)
	if seccomp != "" && (!filepath.IsAbs(seccomp) || strings.ContainsAny(seccomp, "\r\n\x00")) {
		return nil, failure.New(failure.SandboxSecurityProfile, "the seccomp profile must be an absolute host path")
	}
	if lsm != "" && !lsmOptionPattern.MatchString(lsm) {
		return nil, failure.New(failure.SandboxSecurityProfile, "the LSM security option %q is not apparmor=<profile> or label=<options>", clip(lsm, 80))
	}
	if executionPolicy == messages.PolicySandboxRequired && (seccomp == "" || lsm == "") {
		return nil, failure.New(failure.SandboxSecurityUnavailable, "the %s policy needs both a seccomp profile and an LSM option", messages.PolicySandboxRequired)
	}
	var opts []string
	if seccomp != "" {
		profile, err := readSeccompProfile(seccomp)
		if err != nil {
			return nil, err
		}
		opts = append(opts, "seccomp="+profile)
	}
	if lsm != "" {
		opts = append(opts, lsm)
	}
	return opts, nil
}

func readSeccompProfile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", failure.Wrap(failure.SandboxSecurityUnavailable, err, "read seccomp profile")
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, maxSeccompProfileBytes+1))
	if err != nil {
		return "", failure.Wrap(failure.SandboxSecurityUnavailable, err, "read seccomp profile")
	}
	if len(raw) > maxSeccompProfileBytes {
		return "", failure.New(failure.SandboxSecurityProfile, "the seccomp profile exceeds %d bytes", maxSeccompProfileBytes)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil || !bytes.HasPrefix(compact.Bytes(), []byte("{")) {
		return "", failure.New(failure.SandboxSecurityProfile, "the seccomp profile is not a JSON object")
	}
	return compact.String(), nil
}
