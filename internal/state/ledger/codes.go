package ledger

import "github.com/forgedev/forged/failure"

// Failure codes of the ledger and cleanup-report store (registered in
// package failure).
var (
	// CodeLedgerInvalid: an entry refused on write, or a ledger on disk
	// that is corrupt, oversized, a symbolic link or fails its schema.
	CodeLedgerInvalid = failure.LedgerInvalid
	// CodeLeaseTransition: a lease state change the table forbids.
	CodeLeaseTransition = failure.LeaseTransitionInvalid
	// CodeReportInvalid: a cleanup report (or report id) that fails
	// validation.
	CodeReportInvalid = failure.CleanupReportInvalid
	// CodeStateIO: the state directory could not be read or written.
	CodeStateIO = failure.StateIOFailed
)
