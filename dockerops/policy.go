package dockerops

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// maxSeccompProfileBytes bounds an operator's seccomp profile.
const maxSeccompProfileBytes = 1 << 20

var lsmOptionPattern = regexp.MustCompile(`^(apparmor=[a-zA-Z0-9_.-]{1,128}|label=[a-zA-Z0-9_:,.-]{1,256})$`)

// EngineSecurity is what the engine enforces, from preflight's facts.
type EngineSecurity struct {
	// Known: a preflight report exists; unknown facts refuse
	// sandbox_required.
	Known bool
	// Seccomp: the engine applies seccomp profiles.
	Seccomp bool
	// LSM are the engine's enabled Linux security modules ("apparmor",
	// "selinux").
	LSM []string
}

// Seccomp default actions that confine: everything not allowed by a rule
// is refused. ALLOW and LOG let everything through, TRACE lets a tracer in
// the sandbox (a task may ptrace its own children) allow anything, and
// NOTIFY needs a listener the engine does not provide.
var confiningSeccompDefaults = map[string]bool{
	"SCMP_ACT_ERRNO":        true,
	"SCMP_ACT_KILL":         true,
	"SCMP_ACT_KILL_PROCESS": true,
	"SCMP_ACT_KILL_THREAD":  true,
	"SCMP_ACT_TRAP":         true,
}

// ResolveSecurityOptions turns the operator's sandbox security settings
// into WorkerSpec.SecurityOpts. seccompProfilePath is an absolute host path
// to a JSON seccomp profile; the Engine API takes the profile's content,
// not its path, so it is read and compacted here ("seccomp=<json>").
// lsmOption is "apparmor=<profile>" or "label=<selinux options>". Both are
// optional except under the sandbox_required execution policy, which also
// requires:
//   - an engine that enforces seccomp, and the LSM the option names
//     (failure.SandboxSecurityUnavailable, as is a profile that cannot be
//     read);
//   - options that keep confinement on: no apparmor=unconfined, no
//     label=disable and no SELinux type that is unconfined (spc_t,
//     unconfined_t), and a seccomp profile whose default action refuses
//     (ERRNO, KILL*, TRAP): an allowlist, never a profile that lets every
//     unlisted syscall through (failure.SandboxSecurityProfile).
//
// Malformed settings are failure.SandboxSecurityProfile under every policy.
func ResolveSecurityOptions(executionPolicy, seccompProfilePath, lsmOption string, engine EngineSecurity) ([]string, error) {
	seccomp := strings.TrimSpace(seccompProfilePath)
	lsm := strings.TrimSpace(lsmOption)
	if seccomp != "" && (!filepath.IsAbs(seccomp) || strings.ContainsAny(seccomp, "\r\n\x00")) {
		return nil, failure.New(failure.SandboxSecurityProfile, "the seccomp profile must be an absolute host path")
	}
	if lsm != "" && !lsmOptionPattern.MatchString(lsm) {
		return nil, failure.New(failure.SandboxSecurityProfile, "the LSM security option %q is not apparmor=<profile> or label=<options>", text.Clip(lsm, 80))
	}
	required := executionPolicy == messages.PolicySandboxRequired
	if required {
		if seccomp == "" || lsm == "" {
			return nil, failure.New(failure.SandboxSecurityUnavailable, "the %s policy needs both a seccomp profile and an LSM option", messages.PolicySandboxRequired)
		}
		if err := checkConfiningLSM(lsm); err != nil {
			return nil, err
		}
		if err := checkEngineEnforces(engine, lsm); err != nil {
			return nil, err
		}
	}
	var opts []string
	if seccomp != "" {
		profile, err := readSeccompProfile(seccomp)
		if err != nil {
			return nil, err
		}
		if required {
			if err := checkConfiningSeccomp(profile); err != nil {
				return nil, err
			}
		}
		opts = append(opts, "seccomp="+profile)
	}
	if lsm != "" {
		opts = append(opts, lsm)
	}
	return opts, nil
}

// checkConfiningLSM refuses an LSM option that switches confinement off.
func checkConfiningLSM(lsm string) error {
	kind, value, _ := strings.Cut(lsm, "=")
	off := false
	switch kind {
	case "apparmor":
		off = value == "unconfined"
	case "label":
		for _, part := range strings.Split(value, ",") {
			key, v, _ := strings.Cut(part, ":")
			off = off || part == "disable" || (key == "type" && (v == "spc_t" || v == "unconfined_t"))
		}
	}
	if off {
		return failure.New(failure.SandboxSecurityProfile, "the %s policy refuses %q: it switches confinement off", messages.PolicySandboxRequired, lsm)
	}
	return nil
}

// checkEngineEnforces refuses an engine that would silently not apply the
// profiles: one without seccomp, or without the LSM the option names.
func checkEngineEnforces(engine EngineSecurity, lsm string) error {
	if !engine.Known {
		return failure.New(failure.SandboxSecurityUnavailable, "the %s policy needs the engine's security facts, and no preflight report is available", messages.PolicySandboxRequired)
	}
	if !engine.Seccomp {
		return failure.New(failure.SandboxSecurityUnavailable, "the %s policy needs seccomp, and the engine does not enforce it", messages.PolicySandboxRequired)
	}
	module := map[string]string{"apparmor": "apparmor", "label": "selinux"}[strings.SplitN(lsm, "=", 2)[0]]
	if !slices.Contains(engine.LSM, module) {
		return failure.New(failure.SandboxSecurityUnavailable, "the LSM option %q needs %s, and the engine does not enforce it (it has %v)", lsm, module, engine.LSM)
	}
	return nil
}

// checkConfiningSeccomp refuses a seccomp profile whose default action
// lets unlisted syscalls through, or whose rules allow a syscall the
// sandbox must not make (checkSeccompDenies).
func checkConfiningSeccomp(profile string) error {
	var p struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal([]byte(profile), &p); err != nil {
		return failure.New(failure.SandboxSecurityProfile, "the seccomp profile is not a seccomp profile: %v", err)
	}
	if !confiningSeccompDefaults[p.DefaultAction] {
		return failure.New(failure.SandboxSecurityProfile,
			"the %s policy needs a seccomp allowlist (defaultAction SCMP_ACT_ERRNO, SCMP_ACT_KILL*, or SCMP_ACT_TRAP); this profile's default action %q lets unlisted syscalls through",
			messages.PolicySandboxRequired, text.Clip(p.DefaultAction, 64))
	}
	return checkSeccompDenies(profile)
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
