package dockerops

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// mustDenySyscalls are the syscalls a sandbox_required seccomp profile
// must not let the worker make: new mounts and namespaces, kernel modules
// and kexec, eBPF and perf, the kernel keyring, handle-based opens that
// walk past the mount, userfaultfd (a race amplifier of kernel exploits),
// and host-wide clock, swap, quota, accounting, reboot and I/O-port calls.
// Docker's default profile denies all of them to a container without
// capabilities (most are allowed only with CAP_SYS_ADMIN, CAP_SYS_MODULE,
// CAP_SYS_BOOT…, and the worker has none), so a profile derived from it
// passes; a profile whose default action refuses but that allows one of
// these outright does not.
var mustDenySyscalls = []string{
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"bpf", "perf_event_open",
	"keyctl", "add_key", "request_key",
	"open_by_handle_at", "userfaultfd",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "settimeofday", "clock_settime", "iopl", "ioperm", "syslog", "lookup_dcookie",
}

// seccompRule is one rule of a Docker seccomp profile.
type seccompRule struct {
	Name     string   `json:"name"` // the legacy single-name form
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	Includes struct {
		Caps []string `json:"caps"`
	} `json:"includes"`
}

// checkSeccompDenies refuses a profile with a rule that lets the worker
// make one of mustDenySyscalls. A rule that lets a syscall through is one
// whose action is not confining (SCMP_ACT_ALLOW, _LOG, _TRACE, _NOTIFY);
// one the engine applies only with capabilities (includes.caps) never
// applies to the worker, which has none.
func checkSeccompDenies(profile string) error {
	var p struct {
		Syscalls []seccompRule `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(profile), &p); err != nil {
		return failure.New(failure.SandboxSecurityProfile, "the seccomp profile is not a seccomp profile: %v", err)
	}
	var allowed []string
	for _, r := range p.Syscalls {
		if confiningSeccompDefaults[r.Action] || len(r.Includes.Caps) > 0 {
			continue
		}
		for _, name := range append(slices.Clone(r.Names), r.Name) {
			if slices.Contains(mustDenySyscalls, name) && !slices.Contains(allowed, name) {
				allowed = append(allowed, name)
			}
		}
	}
	if len(allowed) > 0 {
		return failure.New(failure.SandboxSecurityProfile,
			"the %s policy needs a seccomp profile that denies %s to the worker; this profile allows it (remove the rule, or gate it on a capability as Docker's default profile does)",
			messages.PolicySandboxRequired, strings.Join(allowed, ", "))
	}
	return nil
}
