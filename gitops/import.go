package gitops

import (
	"context"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

const (
	verifyTimeout    = 2 * time.Minute
	hostFetchTimeout = 5 * time.Minute
)

// ImportRequest describes one validated result to bring into the host
// repository.
type ImportRequest struct {
	RepoPath, StateRoot, AttemptID, WorktreeKey, InputCommitSHA, ResultCommitSHA, BundlePath string
	// AssertCurrent is called immediately before the managed branch moves;
	// a non-nil error aborts the import with nothing moved and is returned
	// unchanged. Nil means the attempt is always current.
	AssertCurrent func() error
	// Budget bounds the import; the zero value takes the defaults.
	Budget Budget
}

// ImportResult brings a worker's result bundle into the host repository and
// moves the managed branch refs/heads/<WorktreeKey> from InputCommitSHA to
// ResultCommitSHA.
//
// The bundle is verified against the host repository, then fetched into a
// fresh quarantine repository under StateRoot/quarantine/<attemptHex>
// (removed afterwards, whatever happens) where its objects are measured
// against the budget and fsck'd strictly, and the result is checked to be
// the commit the manifest names, descended from the input, within the
// commit-depth budget. Only then are the objects fetched into the host under
// refs/forge/imports/<attemptHex> (deleted afterwards), AssertCurrent is
// consulted, and the branch is moved with a compare-and-swap (see
// failure.SandboxOutputConflict). Bundle problems are
// failure.SandboxOutputInvalid.
//
// When both ResultCommitSHA and BundlePath are empty the task committed
// nothing and ImportResult returns nil. It does not lock: the caller holds
// AcquireRepoLock for RepoPath.
func ImportResult(ctx context.Context, git *Runner, req ImportRequest) error {
	if req.ResultCommitSHA == "" && req.BundlePath == "" {
		return nil
	}
	hexID, err := req.validate()
	if err != nil {
		return err
	}
	repo, budget := req.RepoPath, req.Budget.withDefaults()
	importRef := importRefPrefix + hexID

	// Not --quiet: git then also hides why verification failed.
	if _, err := git.Run(ctx, repo, RunOpts{Timeout: verifyTimeout, Code: failure.SandboxOutputInvalid},
		"bundle", "verify", req.BundlePath); err != nil {
		return err
	}
	q, cleanup, err := newQuarantine(ctx, git, repo, req.StateRoot, hexID)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := q.receive(ctx, req.BundlePath, req.ResultCommitSHA, importRef); err != nil {
		return err
	}
	if err := q.check(ctx, importRef, req.InputCommitSHA, req.ResultCommitSHA, budget); err != nil {
		return err
	}
	if err := q.lendHostObjects(); err != nil {
		return err
	}

	_ = deleteRef(ctx, git, repo, importRef) // a leftover would block the fetch
	defer func() { _ = deleteRef(ctx, git, repo, importRef) }()
	if _, err := git.Run(ctx, repo, RunOpts{Timeout: hostFetchTimeout, Env: []string{"GIT_NO_REPLACE_OBJECTS=1"}},
		"-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true",
		"fetch", "--quiet", "--no-write-fetch-head", "--no-tags", q.dir, importRef+":"+importRef); err != nil {
		return err
	}
	if got, ok, err := refValue(ctx, git, repo, importRef, failure.SandboxRuntimeFailed); err != nil {
		return err
	} else if !ok || got != req.ResultCommitSHA {
		return failure.New(failure.SandboxRuntimeFailed, "imported ref %s does not hold the result commit", importRef)
	}

	if req.AssertCurrent != nil {
		if err := req.AssertCurrent(); err != nil {
			return err
		}
	}
	return moveManagedBranch(ctx, git, repo, req.WorktreeKey, req.InputCommitSHA, req.ResultCommitSHA)
}

func (req ImportRequest) validate() (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", failure.New(failure.SandboxOutputInvalid, "import request: "+format, args...)
	}
	hexID, ok := attemptHex(req.AttemptID)
	switch {
	case !ok:
		return invalid("attempt id %q is not a full UUID", truncate(req.AttemptID, 64))
	case !cleanAbs(req.RepoPath) || !cleanAbs(req.StateRoot) || !cleanAbs(req.BundlePath):
		return invalid("repository, state root and bundle paths must be clean absolute paths")
	case !validBranch(req.WorktreeKey):
		return invalid("worktree key %q is not a valid branch name", truncate(req.WorktreeKey, 64))
	case !messages.IsFullSHA(req.InputCommitSHA) || !messages.IsFullSHA(req.ResultCommitSHA) ||
		len(req.InputCommitSHA) != len(req.ResultCommitSHA):
		return invalid("input and result commits must be full object ids of one hash")
	}
	return hexID, nil
}
