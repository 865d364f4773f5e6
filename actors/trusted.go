package actors

import (
	"errors"
	"fmt"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Trusted host failures and the output: the rule of the seed's
// applyTrustedHostFailure. A trusted host failure is a fact the host
// itself established: the engine's inspected state or kernel counters
// (OOM, PIDs, storage, file descriptors) or a time limit the host measured
// (hard wall, idle). When one decided how the worker ended:
//
//   - the outcome is failed, with the host's code (never the worker's);
//   - the worker's output is still validated, and when it validates the
//     result commit is imported and the managed branch moves to it, fenced,
//     exactly as for a successful attempt (a partial result is worth
//     keeping: the next attempt continues from it);
//   - the outcome says both: its message names the imported commit and
//     its resultCommitSha is set;
//   - the worker's own account is kept as the cause
//     (sandbox_child_result_unknown with its summary when the task exited
//     non-zero), as evidence only;
//   - the result is never published (bridge_push), like any failed task's.

// hostFailure is the trusted host failure that decided how the worker
// ended, or nil: a time limit the host saw pass comes first (it came
// first, and the kill it led to may look like anything), then what the
// inspected state says.
func (a *attemptActor) hostFailure() error {
	if a.timers.fired != nil {
		return a.timers.fired
	}
	return a.verdict.trusted
}

// trustedOutcome is the attempt's failure when a trusted host failure
// decided it and the output was imported (or the import failed).
func trustedOutcome(host error, imported importDone, branch string) error {
	msg := failureMessage(host)
	switch {
	case imported.err != nil:
		return failure.Wrap(failure.CodeOf(host), imported.err, "%s; its output validated but was not imported", msg)
	case imported.result != "":
		return failure.New(failure.CodeOf(host), "%s; its validated output was imported as %s on %s", msg, imported.result, branch)
	default:
		return failure.New(failure.CodeOf(host), "%s; its validated output changed nothing", msg)
	}
}

// childCauses is the worker's own account behind a trusted failure.
func childCauses(exit *WorkerExited, summary string) []messages.FailureCause {
	if exit == nil || exit.ExitCode == 0 {
		return nil
	}
	message := text.OneLine(summary, 500)
	if message == "" {
		message = fmt.Sprintf("the worker exited with code %d", exit.ExitCode)
	}
	return []messages.FailureCause{{Code: string(failure.SandboxChildResultUnknown), Message: message, Source: "sandbox"}}
}

// failureMessage is err's own message, without its code prefix.
func failureMessage(err error) string {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}
