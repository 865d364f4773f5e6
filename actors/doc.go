// Package actors holds the actor tree of one sandbox attempt.
//
// The attempt actor is spawned by the root supervisor when the attempt is
// admitted into a capacity slot. It owns the attempt's pipeline and is the
// parent of:
//
//	attempt
//	├── lease-watchdog  aborts the attempt at lease expiry (exact timer, no polling)
//	├── build           content-keyed image build under the global build permit
//	├── worker          the hardened worker container: create, copy in, attach, wait
//	├── memory-sampler  peak memory of the sandbox containers
//	└── service/<type>  one per contract service (refused until services land)
//
// # Supervision strategy
//
// The attempt supervises its children with an explicit per-kind spec
// (see ChildSpecs):
//
//   - worker: never restarted. A sandbox run is not idempotent; if the worker
//     actor fails, the attempt fails with sandbox_runtime_failed.
//   - build: never restarted. A Dockerfile the build policy refuses fails
//     the attempt with sandbox_build_policy_failed before the cache lookup;
//     a failed build with sandbox_build_failed (its redacted log stored
//     under the state root); a crashed build releases the build permit
//     because the root supervisor watches the permit holder.
//   - lease-watchdog: restarted (at most 3 times a minute) and re-armed on
//     restart from the attempt's fence; beyond that the attempt is aborted,
//     since a lease that cannot be enforced must not keep running.
//   - memory-sampler: restarted (at most 3 times a minute); beyond that the
//     attempt carries on without telemetry.
//
// The root supervisor never restarts an attempt: when one crashes, the
// supervisor tears its resources down by their labels and reports the
// attempt failed. Every other failure path (a step error, cancellation,
// lease expiry, a child failure) goes through the attempt's own teardown,
// which runs on a context that survives cancellation.
//
// Actors never block their mailbox: Docker and git calls run on goroutines
// owned by the actor (see runAsync), whose results come back as messages;
// every such goroutine ends with its call's deadline or the actor's
// cancellation.
package actors
