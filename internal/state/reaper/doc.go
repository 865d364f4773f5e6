// Package reaper removes the Docker objects that forged attempts left
// behind: after a crash (kill -9), after a failed teardown, or when the
// server no longer knows an attempt. One call to Run is one round; the
// daemon runs a round at start and then on a timer, under its supervisor,
// and `forged reap [--dry-run]` runs a single one.
//
// A round has two phases.
//
// From the ledgers (package ledger), for this runner's attempts only: an
// attempt this process is running (Config.Live) is never touched; any
// other is reaped when ShouldReapLedger says so, that is when the ledger
// belongs to another runner instance (a dead predecessor sharing this
// state root), when its lease has expired and no server snapshot is
// available, or when the server's snapshot no longer holds it with the
// same fence, instance and an unexpired lease. A degraded ledger (its own
// teardown failed) that is not live is reaped too, so a failed removal is
// retried every round. Reaping is the one teardown operation
// (internal/teardown, source "reaper"), which the attempt's own teardown
// and the supervisor's crash cleanup share: it writes the ledger as
// releasing, tears the attempt down by its exact ownership, stores the
// cleanup report durably, and only then removes the ledger. When anything
// fails (or the engine could not be listed, so what remains is unknown) the
// ledger is kept as degraded.
//
// From the engine's labels: every managed container, network and volume
// (in that order: all the containers before any network, all the networks
// before any volume; the objects of one kind eight at a time) is removed
// only when all of these hold:
//
//   - its labels are complete and exact (dockerops.OwnershipFromLabels:
//     dev.forge.managed=true, equal resource and execution lease ids, every
//     identity a full UUID) and its runner id is this runner's;
//   - its attempt is not live: not run by this process, not kept by a
//     ledger whose lease is current, not held by the server's snapshot;
//   - it was created before the round began and at least Config.Grace
//     before it (a creation time with whole-second precision is taken as
//     up to a second later than shown; an unknown time is never old
//     enough);
//   - when its runner instance id is not this process's: the server's
//     snapshot is available and does not hold the attempt for that
//     instance, or, without a snapshot, that instance left a ledger in
//     this state root (so it is a dead predecessor) or the attempt's
//     initial lease expiry (label dev.forge.initial-expires-at) has
//     passed. Another
//     process of the same runner id (a misconfiguration, or a predecessor
//     whose ledger is lost) is thus never robbed of an attempt it may
//     still be running; its objects are reaped through its ledger, or by
//     label once its attempt cannot be live.
//
// Last, a round removes the cgroup parents of image builds
// (Config.BuildCgroups) that a dead process of this runner left: named
// after this runner, held by no build of this process, and empty of
// processes and child cgroups (cgroups.BuildCgroups.Reap).
//
// Objects of other runners are never touched, whatever their labels say.
// Label-phase removals are recorded in cleanup reports (source "reaper")
// too. In dry-run mode nothing is changed, no ledger is written and no
// report stored: the round lists what it would reap and remove.
package reaper
