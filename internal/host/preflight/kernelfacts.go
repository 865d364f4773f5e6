package preflight

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forgedev/forged/messages"
)

// ProbeKernelFacts finds which kernel facts about a running sandbox this
// process can read. The cgroup counters are located through the sandbox
// init's /proc/<pid>/cgroup: the probe reads pid 1's, a process of another
// user as a sandbox's is, which fails where /proc hides other users'
// processes (systemd's ProtectProc=invisible, a hidepid mount). The file
// systems are read through /proc/<pid>/root, which the kernel opens to
// another user's process only with ptrace access, so with CAP_SYS_PTRACE:
// the probe asks for that capability (pid 1 itself may refuse even root,
// as a non-dumpable init does).
func ProbeKernelFacts() messages.KernelFactsAccess {
	return probeKernelFacts("/proc", canPtraceOthers)
}

func probeKernelFacts(procRoot string, ptrace func() error) messages.KernelFactsAccess {
	var access messages.KernelFactsAccess
	var missing []string
	if _, err := os.ReadFile(filepath.Join(procRoot, "1", "cgroup")); err == nil {
		access.Counters = true
	} else {
		missing = append(missing, fmt.Sprintf("cgroup counters (%v: /proc hides other users' processes, e.g. ProtectProc=invisible)", err))
	}
	if err := ptrace(); err == nil {
		access.Filesystems = true
	} else {
		missing = append(missing, fmt.Sprintf("sandbox file systems (statfs through /proc/<pid>/root: %v)", err))
	}
	if len(missing) > 0 {
		access.Reason = fmt.Sprintf("forged (uid %d) cannot read %s; classification falls back to the engine's and the worker's reports there (see docs/operations.md, Kernel facts)",
			os.Geteuid(), strings.Join(missing, " nor "))
	}
	return access
}
