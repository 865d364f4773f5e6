// Package gitops is forged's trusted host-side git: input preparation,
// output validation, quarantine import, fenced branch moves and
// publication of results to a remote.
//
// Everything here runs on the host with the real git binary (never through a
// shell) and treats what a sandbox produced as hostile: the worker's output
// directory is validated by ValidateOutput, and its git bundle only reaches
// the host repository through a throw-away quarantine repository where it is
// fsck'd and measured against a Budget. The managed branch is then moved
// with a compare-and-swap against the commit the sandbox started from.
// Publish pushes an imported result with a redeemed, validated credential
// that git only sees through its environment, leased on the remote
// branch's observed value.
//
// Prepare, ImportResult and Publish do not serialise themselves: callers
// hold the per-repository lock from AcquireRepoLock around each call.
package gitops
