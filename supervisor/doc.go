// Package supervisor is forged's root actor. It owns the host's capacity
// slots and the global build permit, admits attempts (spawning one attempt
// actor tree per admitted dispatch, queueing the rest in a bounded FIFO and
// refusing beyond it with capacity_exhausted), runs the reaper, and answers
// snapshots.
//
// Admission is a budget (budget.go): every admitted attempt holds its
// dispatch's requested memory (worker + services + runtime overhead) and
// CPU millis until it finishes, against the host's total memory less its
// reserve and its cores less the reserved ones, from the preflight report.
// A dispatch that can never fit, even alone, is refused with
// dispatch_exceeds_host and the numbers; one that does not fit now waits in
// the FIFO queue, which nobody overtakes.
//
// Supervision (rootStrategy): an attempt is never restarted (a sandbox run
// is not idempotent). When an attempt actor crashes instead of finishing,
// the supervisor releases it through the one teardown operation
// (internal/teardown, with Config.Ledgers): its Docker objects are removed
// by their ownership labels, the cleanup report is persisted and its ledger
// released or kept degraded, on a context that survives cancellation; it
// then reports the attempt failed, and only then frees its slot. The
// reaper is restarted after a panic, at most 5 times a minute; beyond that
// it is stopped and a fresh one is spawned an interval later, so periodic
// reaping never ends while the supervisor runs. The image collector
// (Config.Collector, package collector) is a child restarted within the
// same bounds; beyond them it stays stopped (images are kept, nothing
// else is affected). The supervisor forwards collector.CollectNow to it.
//
// Timers (the capacity refresh, the reaper's rounds, a reaper's respawn)
// run on Config.Clock (internal/clock): tests move a manual clock instead
// of sleeping.
//
// The build permits are a pool of Config.BuildPermits (default 1), granted
// FIFO to the actors that ask for one with AcquireBuildPermit, at most one
// per image key: a waiter whose key is being built lets later waiters of
// other keys pass, and builds once that build ends (finding its image in
// the cache). One that must wait is told its place in the queue
// (BuildPermitQueued). The supervisor watches every holder and waiter: a
// permit is released when its holder replies ReleaseBuildPermit or
// terminates for any reason, so a crashed build never keeps one.
package supervisor
