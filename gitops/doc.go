// Package gitops is forged's trusted host-side git: input preparation,
// output validation, quarantine import, fenced branch moves and
// publication of results to a remote.
//
// Everything here runs on the host with the real git binary (never through a
// shell), hardened on every call (see Runner.Run: no system or global
// configuration, no hooks, no fsmonitor, no transport protocol unless the
// call allows one, safe.directory naming exactly the repository), and
// treats what a sandbox produced as hostile: the worker's output directory
// is validated by ValidateOutput, and its git bundle only reaches the host
// repository through a throw-away quarantine repository. There the bundle's
// pack is measured by ScanPack before git inflates anything, indexed with
// `git index-pack --strict` (fsck of the pack's own objects, never of the
// host's), and the result is proven: prerequisites in the input's history,
// the commit-depth budget, descent from the input, and no object needed
// that is neither in the pack nor in the input's history. The managed
// branch, which must lie in the managed namespace, is then moved with a
// compare-and-swap against the commit the sandbox started from; a
// checked-out host worktree is updated only within a bound measured before
// anything is written. Publish pushes an imported result with a redeemed,
// validated credential that git only sees through its environment, leased
// on the remote branch's observed value.
//
// The image build context is the config commit's tree written from its
// objects (`git ls-tree` and `git cat-file --batch` into a tar forged
// writes), never `git archive`: the archive applies the commit's own
// .gitattributes (export-subst splices commit messages into files) and the
// repository's filter drivers, so the Dockerfile built would not be the
// blob the build policy checked. Raw blobs make them the same bytes; see
// context.go for why this beats archiving and comparing afterwards.
//
// Prepare, ImportResult and Publish do not serialise themselves: callers
// hold the per-repository lock from AcquireRepoLock around each call.
package gitops
