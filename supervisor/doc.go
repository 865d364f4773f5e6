// Package supervisor is forged's root actor. It owns the host's capacity
// slots and the global build permit, admits attempts (spawning one attempt
// actor tree per admitted dispatch, queueing the rest in a bounded FIFO and
// refusing beyond it with capacity_exhausted), and answers snapshots.
//
// Supervision: an attempt is never restarted (a sandbox run is not
// idempotent). When an attempt actor crashes instead of finishing, the
// supervisor removes the attempt's Docker resources by their ownership
// labels on a context that survives cancellation, reports the attempt
// failed, and only then frees its slot.
//
// The build permit is granted FIFO to the actors that ask for it with
// AcquireBuildPermit; one that must wait is told its place in the queue
// (BuildPermitQueued). The supervisor watches every holder and waiter: the
// permit is released when its holder replies ReleaseBuildPermit or
// terminates for any reason, so a crashed build never keeps it.
package supervisor
