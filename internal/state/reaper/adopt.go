package reaper

import (
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
)

// Re-adoption at start-up. The runner id (STATE_ROOT/runner-id) owns the
// attempts of a state root across restarts; the runner instance id only
// names the process that started an attempt (the worker echoes it in its
// manifest, so an adopted attempt keeps it). At start, before the first
// reaper round, forged decides for every ledger of its runner id whether
// the attempt can be re-adopted (DecideAdoption); those it adopts are live
// in the new process, so no round touches them, and every other one is
// reaped by the start-up round and reported with the code DecideAdoption
// gives.

// WorkerFacts is what the engine says of an attempt's worker container
// when forged starts.
type WorkerFacts struct {
	// Found: the container exists and was started (running or exited);
	// a container created but never started counts as gone.
	Found bool
	// Running: its process still runs; false for a worker that finished
	// while forged was away (it is collected).
	Running bool
	// NeverStarted: the container exists but was never started (forged
	// died between creating and starting it).
	NeverStarted bool
}

// AdoptVerdict is the start-up decision for one ledger: adopt it, or reap
// it with Code (and Reason, one sentence for the outcome's message).
type AdoptVerdict struct {
	Adopt  bool
	Code   failure.Code
	Reason string
}

// DecideAdoption decides whether the attempt of e can be re-adopted at
// now: its ledger is active and carries an adoption record of a worker
// protocol this forged speaks (knownProtocol), its lease is still valid,
// it has nothing that is not re-adopted (unsupportedSidecar: an
// open_public network and its netns holder; services and the egress proxy
// are re-adopted) and its worker container still exists. Checks of the adoption record against
// the state file and the host key come after, in the attempt's loader; a
// failure there is failure.SandboxReadoptLedgerDamaged too.
func DecideAdoption(e ledger.Entry, worker WorkerFacts, knownProtocol func(int) bool, now time.Time) AdoptVerdict {
	reap := func(code failure.Code, reason string) AdoptVerdict {
		return AdoptVerdict{Code: code, Reason: reason}
	}
	switch {
	case e.State == ledger.Starting:
		return reap(CodeRunnerRestarted, "forged restarted while the attempt was being provisioned; its resources were reaped and it was not run again")
	case e.State != ledger.Active:
		return reap(CodeRunnerRestarted, "forged restarted while the attempt was being torn down; the teardown was completed")
	case e.Adoption == nil:
		return reap(failure.SandboxReadoptLedgerDamaged, "the attempt's ledger has no adoption record (written by an older forged?); it was reaped, not re-adopted")
	case e.Adoption.ExitSeen:
		return reap(CodeRunnerRestarted, "forged restarted after the attempt's worker had exited, while its output was collected, imported or published; its resources were reaped and it was not run again")
	case !knownProtocol(e.Adoption.WorkerProtocol):
		return reap(failure.SandboxReadoptProtocol, "the attempt's worker speaks an unknown worker protocol version; it was reaped, not re-adopted")
	case !e.ExpiresAt.After(now):
		return reap(failure.SandboxReadoptLeaseExpired, "the attempt's lease expired at "+e.ExpiresAt.UTC().Format(time.RFC3339)+" while forged was away; the worker was stopped and reaped")
	case unsupportedSidecar(e) != "":
		return reap(failure.SandboxReadoptUnsupported, "the attempt has "+unsupportedSidecar(e)+", which is not re-adopted (services and the egress proxy are); it was reaped")
	case worker.NeverStarted:
		return reap(CodeRunnerRestarted, "forged restarted between creating the attempt's worker and starting it; the worker never ran, its resources were reaped and it was not run again")
	case !worker.Found:
		return reap(failure.SandboxReadoptWorkerGone, "the attempt's worker container was gone when forged restarted; the attempt was reaped")
	}
	return AdoptVerdict{Adopt: true}
}

// unsupportedSidecar names what the ledger plans that re-adoption does
// not take over, "" when it plans only the worker, its volumes (its own
// credentials volume among them), its caches, services with their own
// secrets volumes on the internal attempt network, and the egress proxy
// with its egress network.
func unsupportedSidecar(e ledger.Entry) string {
	for _, r := range e.Planned {
		switch {
		case r.Role == "agent", r.Role == "workspace", r.Role == "control", r.Role == "secrets", r.Role == "credentials", strings.HasPrefix(r.Role, "cache:"):
		case r.Role == "internal" && r.Type == ledger.ResourceNetwork:
		case strings.HasPrefix(r.Role, "service:") && r.Type == ledger.ResourceContainer, strings.HasPrefix(r.Role, "secrets:") && r.Type == ledger.ResourceVolume:
		case r.Role == "egress" && r.Type == ledger.ResourceNetwork, r.Role == "egress_proxy" && r.Type == ledger.ResourceContainer:
		case r.Role == "open", r.Role == "netns_holder":
			return "an open_public network and its guarded netns holder"
		default:
			return "a " + r.Type + " of role " + r.Role
		}
	}
	return ""
}
