package ledger

import "github.com/forgedev/forged/failure"

// Failure codes of the ledger and cleanup-report store.
const (
	// CodeLedgerInvalid: an entry refused on write, or a ledger on disk
	// that is corrupt, oversized, a symbolic link or fails its schema.
	CodeLedgerInvalid failure.Code = "sandbox_ledger_invalid"
	// CodeLeaseTransition: a lease state change the table forbids.
	CodeLeaseTransition failure.Code = "sandbox_lease_transition_invalid"
	// CodeReportInvalid: a cleanup report (or report id) that fails
	// validation.
	CodeReportInvalid failure.Code = "sandbox_cleanup_report_invalid"
	// CodeStateIO: the state directory could not be read or written.
	CodeStateIO failure.Code = "sandbox_state_io_failed"
)
