// Package gitops is forged's trusted host-side git: input preparation,
// output validation, quarantine import and fenced branch moves.
//
// Everything here runs on the host with the real git binary (never through a
// shell) and treats what a sandbox produced as hostile: the worker's output
// directory is validated by ValidateOutput, and its git bundle only reaches
// the host repository through a throw-away quarantine repository where it is
// fsck'd and measured against a Budget. The managed branch is then moved
// with a compare-and-swap against the commit the sandbox started from.
//
// Prepare and ImportResult do not serialise themselves: callers hold the
// per-repository lock from AcquireRepoLock around each call.
package gitops
