// Package ledger is forged's crash-safe record of what each sandbox attempt
// owns on the Docker engine, and of every cleanup it performed.
//
// # Ledgers
//
// Every attempt has one ledger file, StateRoot/ledger/<attempt hex>.json,
// written before any Docker object is created (the planned resources) and
// again once they exist (their ids), as its isolation lease moves through
// starting → active → releasing → released (or degraded). After a crash
// the reaper (package reaper) reads the ledgers to find and remove what a
// dead process left behind.
//
// # Cleanup reports
//
// Every teardown and every reap produces a messages.CleanupReport. It is
// stored durably under StateRoot/cleanup-reports/<report hex>.json before
// it is acknowledged, listed with PendingReports and deleted with
// AcknowledgeReport once the server has it.
//
// # Durability and distrust
//
// Directories are created 0700 and files 0600. A file is written to a
// fresh temporary file in the same directory (O_EXCL), synced, closed,
// renamed over its final name and the directory is synced, so a crash
// leaves either the old or the new content, never a torn file.
//
// Reading is defensive: a file must be a regular file (never followed
// through a symbolic link), at most a bounded size, named after its own
// id, strictly decoded (no unknown fields, no trailing data) and
// schema-validated. A file failing any check is left on disk for the
// operator, reported as Corrupt and never trusted.
package ledger
