package gitops

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

const (
	verifyTimeout    = 2 * time.Minute
	hostFetchTimeout = 5 * time.Minute
)

// DefaultManagedNamespace is where managed branches live unless the
// operator configures another namespace.
const DefaultManagedNamespace = messages.DefaultManagedNamespace

// ImportRequest describes one validated result to bring into the host
// repository.
type ImportRequest struct {
	RepoPath, StateRoot, AttemptID, WorktreeKey, InputCommitSHA, ResultCommitSHA, BundlePath string
	// ManagedNamespace is the ref prefix managed branches must live under
	// (a "refs/heads/…/" prefix); empty means DefaultManagedNamespace.
	ManagedNamespace string
	// Squash says the dispatch asked for resultMode squash: the result must
	// be one commit whose only parent is the input.
	Squash bool
	// AssertCurrent is called immediately before the managed branch moves;
	// a non-nil error aborts the import with nothing moved and is returned
	// unchanged. Nil means the attempt is always current.
	AssertCurrent func() error
	// Budget bounds the import; the zero value takes the defaults.
	Budget Budget
	// RewriteIdentity, when set, makes every commit of input..result
	// authored and committed by it before the branch moves (rewrite.go;
	// the publish policy's AuthorRewrite): the managed branch then holds
	// the rewritten result, ImportReport.ResultCommitSHA.
	RewriteIdentity *Identity

	// beforeLock, when set (tests only), is called once the result is
	// proven and its objects are in the host, right before the
	// repository lock is taken for the move.
	beforeLock func()
}

// ImportReport is the host's account of an imported result, from the
// quarantine (never from the worker's words).
type ImportReport struct {
	// ResultCommitSHA is the commit the managed branch moved to: the
	// request's result, or its rewrite under RewriteIdentity.
	ResultCommitSHA string
	// Commits is the number of commits between the input and the result.
	Commits int
	// Newest lists the newest of them (at most messages.MaxReportedCommits),
	// newest first.
	Newest []messages.ResultCommit
	// WorktreeLeft is the host worktree that has the managed branch checked
	// out and was left as it was because the result tree exceeds the
	// worktree budget ("" when there is none or it was updated).
	WorktreeLeft string
	// WorktreeLeftReason says which bound the result tree exceeded.
	WorktreeLeftReason string
}

// ImportResult brings a worker's result bundle into the host repository and
// moves the managed branch refs/heads/<WorktreeKey> from InputCommitSHA to
// ResultCommitSHA. The worker is not trusted for anything:
//
//  1. the request is checked, the managed branch must be inside the managed
//     namespace, and the bundle header is parsed (v2, bounded);
//  2. a fresh quarantine repository is made under
//     StateRoot/quarantine/<attemptHex> (removed afterwards, whatever
//     happens);
//  3. the bundle's pack is measured against the budget by ScanPack before
//     any object is inflated (object count, expanded and inflated bytes,
//     delta results, no reference deltas), then indexed into the quarantine
//     with `git index-pack --strict`, which fsck-checks the pack's own
//     objects and nothing of the host;
//  4. the quarantine proves the result (see quarantine.check): prerequisites
//     in the input's history, the commit-depth budget, descent from the
//     input, and that everything the result needs is in the pack or in the
//     input's history;
//  5. the objects are fetched into the host under
//     refs/forge/imports/<attemptHex> (deleted afterwards);
//  6. under the per-repository lock (AcquireRepoLock) AssertCurrent is
//     consulted, and the branch is moved with a compare-and-swap (see
//     failure.SandboxOutputConflict). A host worktree with the branch
//     checked out is updated only within the worktree budget (see
//     moveManagedBranch).
//
// Only step 6 holds the lock: steps 1–5 touch nothing but the attempt's
// own quarantine and its own import ref, and read only the input's
// history, which no other attempt can change, so imports into one
// repository unpack and prove their results side by side and queue only
// for the move.
//
// Bundle problems are failure.SandboxOutputInvalid. Commit signatures and
// dates are never trusted: nothing here reads a signature, and dates only
// order git's walks (a forged date can make a check refuse, never accept).
//
// When both ResultCommitSHA and BundlePath are empty the task committed
// nothing and ImportResult returns a zero report. It takes the repository
// lock itself (for step 6 only): the caller must not hold it.
func ImportResult(ctx context.Context, git *Runner, req ImportRequest) (ImportReport, error) {
	if req.ResultCommitSHA == "" && req.BundlePath == "" {
		return ImportReport{}, nil
	}
	hexID, err := req.validate()
	if err != nil {
		return ImportReport{}, err
	}
	repo, budget := req.RepoPath, req.Budget.withDefaults()
	importRef := importRefPrefix + hexID

	header, err := readBundleHeader(req.BundlePath)
	if err != nil {
		return ImportReport{}, err
	}
	if header.headFor(req.ResultCommitSHA) == "" {
		return ImportReport{}, failure.New(failure.SandboxOutputInvalid, "bundle has no head at the manifest's result commit %s", req.ResultCommitSHA)
	}
	q, cleanup, err := newQuarantine(ctx, git, repo, req.StateRoot, hexID)
	if err != nil {
		return ImportReport{}, err
	}
	defer cleanup()
	pack, _, err := q.receive(ctx, req.BundlePath, header, budget)
	if err != nil {
		return ImportReport{}, err
	}
	depth, newest, err := q.check(ctx, pack, checkRequest{
		input: req.InputCommitSHA, result: req.ResultCommitSHA, prerequisites: header.Prerequisites,
		squash: req.Squash, budget: budget,
	})
	if err != nil {
		return ImportReport{}, err
	}
	imported := req.ResultCommitSHA
	if req.RewriteIdentity != nil {
		if imported, err = q.rewriteIdentities(ctx, req.InputCommitSHA, req.ResultCommitSHA, *req.RewriteIdentity); err != nil {
			return ImportReport{}, err
		}
		if newest, err = q.summaries(ctx, req.InputCommitSHA, imported); err != nil {
			return ImportReport{}, err
		}
	}
	if err := q.publish(ctx, importRef, imported); err != nil {
		return ImportReport{}, err
	}

	_ = deleteRef(ctx, git, repo, importRef) // a leftover would block the fetch
	defer func() { _ = deleteRef(ctx, git, repo, importRef) }()
	if _, err := git.Run(ctx, repo, RunOpts{Timeout: hostFetchTimeout, Config: []string{"protocol.file.allow=always"}},
		"-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true",
		"fetch", "--quiet", "--no-write-fetch-head", "--no-tags", q.dir, importRef+":"+importRef); err != nil {
		return ImportReport{}, err
	}
	if got, ok, err := refValue(ctx, git, repo, importRef, failure.SandboxRuntimeFailed); err != nil {
		return ImportReport{}, err
	} else if !ok || got != imported {
		return ImportReport{}, failure.New(failure.SandboxRuntimeFailed, "imported ref %s does not hold the result commit", importRef)
	}

	if req.beforeLock != nil {
		req.beforeLock()
	}
	left, err := moveLocked(ctx, git, req, imported, budget)
	if err != nil {
		return ImportReport{}, err
	}
	return ImportReport{ResultCommitSHA: imported, Commits: depth, Newest: newest, WorktreeLeft: left.path, WorktreeLeftReason: left.reason}, nil
}

// moveLocked takes the repository lock, consults AssertCurrent and moves
// the managed branch to result (compare-and-swap), releasing the lock
// afterwards.
func moveLocked(ctx context.Context, git *Runner, req ImportRequest, result string, budget Budget) (worktreeLeft, error) {
	release, err := AcquireRepoLock(ctx, req.StateRoot, req.RepoPath)
	if err != nil {
		return worktreeLeft{}, err
	}
	defer release() //nolint:errcheck // unlocking a held flock cannot meaningfully fail
	if req.AssertCurrent != nil {
		if err := req.AssertCurrent(); err != nil {
			return worktreeLeft{}, err
		}
	}
	return moveManagedBranch(ctx, git, req.RepoPath, req.WorktreeKey, req.InputCommitSHA, result, budget)
}

// readBundleHeader opens the bundle and parses its header.
func readBundleHeader(path string) (*BundleHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxOutputInvalid, err, "open result bundle")
	}
	defer f.Close()
	return ParseBundleHeader(f)
}

// CheckManagedBranch reports whether branch (a name after refs/heads/) may
// be moved by forged: inside namespace (a "refs/heads/…/" prefix; empty
// means DefaultManagedNamespace), below it rather than the namespace itself,
// and neither the repository's default branch nor the base branch. A
// refusal is failure.DispatchInvalid naming why.
func CheckManagedBranch(branch, namespace, defaultBranch, baseBranch string) error {
	if namespace == "" {
		namespace = DefaultManagedNamespace
	}
	ref := "refs/heads/" + branch
	switch {
	case !messages.ValidManagedNamespace(namespace):
		return failure.New(failure.DispatchInvalid, "managed namespace %q is not a refs/heads/…/ prefix", text.Ellipsis(namespace, 64))
	case branch == defaultBranch:
		return failure.New(failure.DispatchInvalid, "field lease.worktreeKey: %q is the repository's default branch, which forged never moves", text.Ellipsis(branch, 64))
	case baseBranch != "" && branch == baseBranch:
		return failure.New(failure.DispatchInvalid, "field lease.worktreeKey: %q is the base branch, which forged never moves", text.Ellipsis(branch, 64))
	case !strings.HasPrefix(ref, namespace) || len(ref) == len(namespace):
		return failure.New(failure.DispatchInvalid, "field lease.worktreeKey: %q is outside the managed namespace %s", text.Ellipsis(branch, 64), namespace)
	}
	return nil
}

func (req ImportRequest) validate() (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", failure.New(failure.SandboxOutputInvalid, "import request: "+format, args...)
	}
	hexID, ok := attemptHex(req.AttemptID)
	switch {
	case !ok:
		return invalid("attempt id %q is not a full UUID", text.Ellipsis(req.AttemptID, 64))
	case !cleanAbs(req.RepoPath) || !cleanAbs(req.StateRoot) || !cleanAbs(req.BundlePath):
		return invalid("repository, state root and bundle paths must be clean absolute paths")
	case !messages.ValidBranch(req.WorktreeKey):
		return invalid("worktree key %q is not a valid branch name", text.Ellipsis(req.WorktreeKey, 64))
	case CheckManagedBranch(req.WorktreeKey, req.ManagedNamespace, "", "") != nil:
		return invalid("worktree key %q is not a managed branch: %v", text.Ellipsis(req.WorktreeKey, 64), CheckManagedBranch(req.WorktreeKey, req.ManagedNamespace, "", ""))
	case len(req.InputCommitSHA) != 40 || len(req.ResultCommitSHA) != 40 ||
		!isLowerHex(req.InputCommitSHA) || !isLowerHex(req.ResultCommitSHA):
		return invalid("input and result commits must be full object ids of one hash (SHA-1)")
	}
	return hexID, nil
}
