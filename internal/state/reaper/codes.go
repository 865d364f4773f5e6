package reaper

import "github.com/forgedev/forged/failure"

// Failure codes of the reaper (registered in package failure).
var (
	// CodeRunnerRestarted is the outcome code of an attempt that was
	// running when forged died and was reaped at the next start; it is
	// never re-run.
	CodeRunnerRestarted = failure.SandboxRunnerRestarted
	// CodeConfigInvalid: the round's runner identities are not full UUIDs.
	CodeConfigInvalid = failure.ReaperConfigInvalid
	// CodeListFailed: the engine's managed objects could not be listed.
	CodeListFailed = failure.ReaperListFailed
)
