// Package actors holds the actor tree of one sandbox attempt.
//
// The attempt actor is spawned by the root supervisor when the attempt is
// admitted into a capacity slot. It owns the attempt's pipeline and is the
// parent of:
//
//	attempt
//	├── lease-watchdog  aborts the attempt at lease expiry (exact timer, no polling)
//	├── build           content-keyed image build under the global build permit
//	├── service         one per declared service (postgres, redis, browser): container, watch, readiness probe
//	├── egress          the egress proxy (public_allowlist): container, watch, readiness probe, access log
//	├── worker          the hardened worker container: create, copy in, attach, wait
//	├── memory-sampler  the kernel's counters of the sandbox containers (peak
//	│                   memory, OOM kills, refused forks, CPU), Engine API stats
//	│                   where they cannot be read; the last reading when the
//	│                   worker's output is written, then the worker's release
//	└── lease-pusher    pushes signed lease renewals into the running worker
//
// # The attempt's shape
//
// The attempt's state is touched only in Receive. Its pipeline is a chain
// of phases (preparing, building, provisioning, running, collecting,
// importing, [publishing], tearing_down, finished). Each host step
// (prepare, provision, collect, import, publish, teardown) is a plain
// function of an explicit input built on the mailbox (attempt_steps.go,
// publish.go); it runs off the mailbox and its result comes back as a
// message. At most one host step runs at a time. The first failure is
// recorded together with the phase it happened in, and leads to teardown
// once the step in flight and the active children have reported.
//
// Teardown is the one teardown operation of package internal/teardown,
// shared with the reaper and the supervisor's crash cleanup: the objects
// are removed by their exact ownership labels, the cleanup report is
// persisted, and the ledger moves through its transition table (releasing,
// then released and removed, or degraded and kept for the reaper).
//
// # Services
//
// A contract's services are checked against the operator's catalogue in
// the prepare step, before any Docker object exists (package services).
// After the network and volumes, the attempt writes fresh per-attempt
// passwords into the secrets volume (0444, read-only for the worker and the
// services; attempt_services.go), spawns one sidecar actor per service
// (sidecar.go, attempt_sidecars.go) and starts the worker only when every
// service answered its protocol probe,
// which runs in a short-lived probe container on the attempt network
// (`forged worker probe`). The total cap is a timer on the attempt's clock.
// The worker gets each service's host, port, user, database and password
// file in its start packet and environment, never a password.
//
// # Network policy
//
// public_allowlist (attempt_egress.go): the attempt network is the
// isolated one, and the egress network (routed, labelled, owned like every
// other object) is created with it. A sidecar actor of kind egress (the
// same lifecycle as a service's, sidecar.go) runs squid from
// the catalogue's pinned `egress` image as the only member of both, with a
// configuration generated from the validated allowlist and the operator's
// options (package egress), probes it from the attempt network, and turns
// its access log (followed through the engine's log stream, parsed
// strictly, bounded at 500 records) into sandbox_egress_request events.
// The worker starts once the proxy and every service are ready, with
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY (and their lower-case forms). When
// the attempt is done with it, the actor stops the proxy so that its log
// ends with the last requests, then stops itself. open_public (operator
// permission, never sandbox_required): a routed attempt network, and the
// worker resolves through the engine.
//
// # Package caches
//
// The prepare step refuses a cache mode the operator's policy forbids
// (AttemptConfig.Caches). The provision step creates each per-attempt
// cache volume with the attempt's other volumes (bounded like them, in the
// ledger's plan, removed by the same teardown) and looks up each read-only
// project cache, which the worker mounts read-only only when the operator
// warmed it (attempt_caches.go, package caches).
//
// The ledger is written by an ordered writer goroutine the attempt owns
// (ledger.go): posting never blocks the mailbox, the provision step waits
// for the planned ledger to be durable before any Docker object exists, and
// the teardown's own writes queue behind every write posted before them.
//
// Time limits (timelimit.go): the operator's hard wall and idle limit,
// shortened by the task timeout, run on the attempt's clock from the
// worker's creation; every streamed line re-arms the idle timer. A limit
// that passes becomes the attempt's trusted host failure, the worker gets a
// grace to stop its task and write its output, then the attempt aborts.
//
// Trusted host failures (trusted.go): when the host's facts decided how the
// worker ended, a valid output is still imported, the outcome is failed
// with the host's code and names the imported commit, and the worker's own
// account is kept as its cause.
//
// Provider credentials (credentials.go): a dispatch naming a provider
// without an adapter is refused at start; otherwise the provision step runs
// the adapter's helper and fills the secrets volume through a loader
// container before the worker exists.
//
// Deadlines are those of the layers that talk to the engine and to git
// (dockerops.Options, gitops): the attempt adds none, so a retry is never
// cut short. Every timer (watchdog, sampler) runs on AttemptConfig.Clock
// (internal/clock), so tests move time by hand.
//
// # Supervision strategy
//
// The attempt supervises its children with an explicit per-kind spec
// (ChildSpecFor). It spawns every child through its strategy, which thus
// knows each child's kind from the spawn, never from its name:
//
//   - worker: never restarted. A sandbox run is not idempotent; if the worker
//     actor fails, the attempt fails with sandbox_runtime_failed.
//   - build: never restarted. A Dockerfile the build policy refuses fails
//     the attempt with sandbox_build_policy_failed before the cache lookup;
//     a failed build with sandbox_build_failed (its redacted log stored
//     under the state root); a crashed build releases the build permit
//     because the root supervisor watches the permit holder.
//   - lease-watchdog: restarted (at most 3 times a minute); a restarted
//     watchdog asks the attempt for the current expiry and does not fire
//     before it has the answer. Beyond that the attempt is aborted, since a
//     lease that cannot be enforced must not keep running. The watchdog
//     shares no state with the attempt: expiries come in messages.
//   - memory-sampler: restarted (at most 3 times a minute); beyond that the
//     attempt carries on without telemetry.
//   - service: never restarted. A restarted database has lost the task's
//     data, so a service that exits before it is ready fails the attempt
//     with sandbox_service_failed at once (fail fast), one that does not
//     pass its readiness probe within its cap (or the attempt's total cap)
//     with sandbox_service_health_timeout, and one that dies while the
//     worker runs with sandbox_service_failed naming it; the worker is
//     stopped and the attempt torn down. A crashed service actor fails the
//     attempt with sandbox_runtime_failed. Once the worker has exited, a
//     service's end no longer matters. Before teardown the attempt cancels
//     its service actors and waits until each has stopped (each stops only
//     once its engine calls returned), so no create races the teardown.
//   - egress: never restarted. A proxy that does not start, does not pass
//     its readiness probe or dies while the worker runs fails the attempt
//     with sandbox_egress_failed (a crashed egress actor with
//     sandbox_runtime_failed); teardown waits for it like for services.
//   - lease-pusher: never restarted (a push is not idempotent); without it
//     renewals still hold on the host, and the worker stops at the last
//     expiry it was given.
//
// The root supervisor never restarts an attempt: when one crashes, the
// supervisor releases its resources through the same teardown operation
// and reports the attempt failed. Every other failure path (a step error,
// cancellation, lease expiry, a child failure) goes through the attempt's
// own teardown, which runs on a context that survives cancellation.
//
// Actors never block their mailbox: Docker and git calls run on goroutines
// owned by the actor (see runAsync), whose results come back as messages;
// every such goroutine ends with its call's deadline or the actor's
// cancellation.
//
// In a runner every actor is instrumented by package metrics: the runner
// spawns the supervisor from a clone of its Props with a counting mailbox,
// receive and send middleware and a context decorator, which instruments
// each child spawned below it the same way. No actor here knows of it, and
// no Props is changed.
package actors
