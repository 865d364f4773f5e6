package reaper

import "github.com/forgedev/forged/failure"

// Failure codes of the reaper.
const (
	// CodeRunnerRestarted is the outcome code of an attempt that was
	// running when forged died and was reaped at the next start; it is
	// never re-run.
	CodeRunnerRestarted failure.Code = "sandbox_runner_restarted"
	// CodeConfigInvalid: the round's runner identities are not full UUIDs.
	CodeConfigInvalid failure.Code = "reaper_config_invalid"
	// CodeListFailed: the engine's managed objects could not be listed.
	CodeListFailed failure.Code = "reaper_list_failed"
)
