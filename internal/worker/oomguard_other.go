//go:build !linux

package worker

import (
	"fmt"
	"os"
)

// OOMGuardCommand is the guard's subcommand (after "worker").
const OOMGuardCommand = "oom-guard"

// OOMGuard is Linux-only.
func OOMGuard() int {
	fmt.Fprintln(os.Stderr, "forged-worker: worker oom-guard runs only on linux")
	return ExitUsage
}

// oomGuards: none here.
const oomGuards = 0

func startOOMGuards(string, int) map[int]bool { return nil }
