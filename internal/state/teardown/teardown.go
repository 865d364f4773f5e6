// Package teardown is forged's one way to release an attempt's isolation:
// tear its Docker objects down by their exact ownership labels, persist the
// cleanup report, and move the attempt's ledger through the lease-state
// table (releasing, then released and removed, or degraded and kept for
// the reaper). The attempt actor's own teardown, the reaper's ledger phase
// and the supervisor's cleanup of a crashed attempt all call Release, so
// every path has the same durability.
package teardown

import (
	"context"
	"errors"
	"fmt"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// Docker removes one attempt's objects by ownership labels
// (dockerops.Client.Teardown). It bounds its own engine calls and survives
// the caller's cancellation.
type Docker interface {
	Teardown(ctx context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error)
}

// Store persists ledgers and cleanup reports (ledger.Store, or an
// attempt's ordered writer).
type Store interface {
	Write(e ledger.Entry) error
	Remove(attemptID string) error
	PersistReport(r messages.CleanupReport) error
}

// Request names what to release.
type Request struct {
	// Owner is the exact ownership the objects must carry.
	Owner dockerops.Ownership
	// Source is recorded in the report: ledger.SourceTeardown or
	// ledger.SourceReaper.
	Source string
	// Ledger is the attempt's ledger as last written; nil when it never
	// wrote one (nothing was created) or none was found.
	Ledger *ledger.Entry
}

// Result is the account of one release.
type Result struct {
	// Report is the cleanup report; Persisted says it is durable.
	Report    messages.CleanupReport
	Persisted bool
	// State is the ledger's final state: ledger.Released (the ledger was
	// removed) or ledger.Degraded (kept for the reaper); "" without a
	// ledger.
	State ledger.State
	// Err is why the release is degraded: the engine teardown failed, some
	// object remains (or the remainder is unknown), or the report could
	// not be persisted. Nil means everything labelled is gone and the
	// report is durable.
	Err error
	// LedgerErr is a failed removal of the ledger or write of its degraded
	// state: the ledger on disk may not say what happened, so the attempt
	// is reported degraded too.
	LedgerErr error
	// ReleasingErr is a failed write of the releasing state. It does not
	// stop the teardown, nor degrade it: the ledger on disk still names the
	// attempt, so a crash now is reaped again.
	ReleasingErr error
}

// Degraded reports whether the attempt must be reported degraded.
func (r Result) Degraded() bool { return r.Err != nil || r.LedgerErr != nil }

// Removed reports whether the ledger was released and removed.
func (r Result) Removed() bool { return r.State == ledger.Released && r.LedgerErr == nil }

// Release tears req.Owner's objects down and records the outcome: the
// ledger goes to releasing first (a crash now is reaped again), the report
// is persisted before the ledger is removed, and a ledger whose teardown
// did not complete is kept as degraded. A state the table forbids (a
// released ledger found again) is not rewritten.
func Release(ctx context.Context, docker Docker, store Store, req Request) Result {
	var res Result
	var current *ledger.Entry
	if req.Ledger != nil {
		e := *req.Ledger
		current = &e
		if releasing, err := e.Transition(ledger.Releasing); err == nil {
			if err := store.Write(releasing); err != nil {
				res.ReleasingErr = ledger.RedactedError(fmt.Errorf("record releasing: %w", err))
			} else {
				current = &releasing
			}
		}
	}

	report, err := docker.Teardown(ctx, req.Owner, req.Source)
	if err == nil && report.RemainingUnknown {
		err = errors.New("the objects remaining after teardown are unknown")
	}
	// Engine errors may quote anything: the report and the error leave
	// here redacted like a build log, for events, outcomes and the store.
	report = ledger.RedactReport(report)
	err = ledger.RedactedError(err)
	res.Report = report
	if perr := store.PersistReport(report); perr != nil {
		err = errors.Join(err, fmt.Errorf("persist cleanup report: %w", perr))
	} else {
		res.Persisted = true
	}
	res.Err = err

	if current == nil {
		return res
	}
	if err == nil {
		res.State = ledger.Released
		if rerr := store.Remove(current.AttemptID); rerr != nil {
			res.LedgerErr = errors.Join(res.LedgerErr, fmt.Errorf("remove ledger: %w", rerr))
		}
		return res
	}
	res.State = ledger.Degraded
	if degraded, terr := current.Transition(ledger.Degraded); terr == nil {
		if werr := store.Write(degraded); werr != nil {
			res.LedgerErr = errors.Join(res.LedgerErr, fmt.Errorf("record degraded: %w", werr))
		}
	}
	return res
}
