package actors

import (
	"context"
	"os"
	"path/filepath"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/remoteurl"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// GitHost is the production Git: gitops on the host repository, holding
// the per-repository coordinator lock around preparation, the import's
// branch move and publication, so that no two attempts (in this or another
// forged process) interleave their ref updates.
//
// A dispatch naming repo.remote works on the member's mirror of that
// remote (gitops.MirrorPath) exactly as on a host repository: Prepare
// first fetches the remote into the mirror, under the same lock; the
// import moves the managed branch in the mirror, and Publish pushes from it.
type GitHost struct {
	Runner    *gitops.Runner
	StateRoot string
	// ValidateRemote checks publication remotes; nil means GitHub only.
	ValidateRemote gitops.RemoteValidator
	// ManagedNamespace is the ref prefix managed branches must live under;
	// empty means gitops.DefaultManagedNamespace.
	ManagedNamespace string
	// PublishPolicy is the operator's publish policy (the zero policy
	// allows everything; the runner defaults to gitops.DefaultPublishPolicy).
	PublishPolicy gitops.PublishPolicy
	// Remotes is the operator's policy for repo.remote dispatches (the
	// zero policy fetches nothing; the runner refuses them at admission).
	Remotes gitops.RemotePolicy
}

// repoPath is the repository the dispatch works on: its repo.localPath,
// or the mirror of its repo.remote (u, and remote true).
func (g GitHost) repoPath(d *messages.Dispatch) (path string, u remoteurl.URL, remote bool, err error) {
	if d.Repo.Remote == "" {
		return d.Repo.LocalPath, remoteurl.URL{}, false, nil
	}
	u, err = remoteurl.Parse(d.Repo.Remote)
	if err != nil {
		return "", u, true, failure.New(failure.DispatchInvalid, "field repo.remote: %v", err)
	}
	return gitops.MirrorPath(g.StateRoot, u), u, true, nil
}

// Prepare bundles the input and archives the build context.
// A repo.remote dispatch's remote is fetched into its mirror first, under
// the mirror's lock (see gitops.FetchMirror).
func (g GitHost) Prepare(ctx context.Context, d *messages.Dispatch, workDir string) (*gitops.Prepared, error) {
	repo, u, remote, err := g.repoPath(d)
	if err != nil {
		return nil, err
	}
	release, err := gitops.AcquireRepoLock(ctx, g.StateRoot, repo)
	if err != nil {
		return nil, err
	}
	defer release() //nolint:errcheck // unlocking a held flock cannot meaningfully fail
	if remote {
		policy := g.Remotes
		if policy.ManagedNamespace == "" {
			policy.ManagedNamespace = g.ManagedNamespace
		}
		if _, err := gitops.FetchMirror(ctx, g.Runner, g.StateRoot, u, policy); err != nil {
			return nil, err
		}
	}
	return gitops.Prepare(ctx, g.Runner, gitops.PrepareRequest{
		RepoPath:          repo,
		AttemptID:         d.AttemptID(),
		WorktreeKey:       d.Lease.WorktreeKey,
		BaseBranch:        d.BaseBranch,
		DefaultBranch:     d.Repo.DefaultBranch,
		ExecutionPolicy:   d.Sandbox.ExecutionPolicy,
		ApprovedConfigSHA: d.Sandbox.SandboxConfigCommitSHA,
		WorkDir:           workDir,
		ContextMemoDir:    g.contextMemoDir(),
	})
}

// contextMemoDir is the state root's memo of build context digests
// (gitops' contextmemo.go), "" without a state root.
func (g GitHost) contextMemoDir() string {
	if g.StateRoot == "" {
		return ""
	}
	return filepath.Join(g.StateRoot, "contexts", "digests")
}

// OpenContext writes the build context for the build that needs it, from
// the host repository's objects of the config commit (gitops.OpenContext:
// without the repository lock, as the commit's objects are immutable).
func (g GitHost) OpenContext(ctx context.Context, p *gitops.Prepared, dir string) (*os.File, error) {
	return gitops.OpenContext(ctx, g.Runner, p, dir)
}

// ValidateOutput validates the worker's output directory.
func (g GitHost) ValidateOutput(outputDir string, expected messages.SandboxIdentity) (*gitops.Output, error) {
	return gitops.ValidateOutput(outputDir, expected)
}

// ImportResult imports the result through the quarantine and moves the
// managed branch, fenced by assertCurrent.
// gitops.ImportResult takes the repository lock itself, around the move
// only, so that imports unpack and prove their results side by side.
func (g GitHost) ImportResult(ctx context.Context, d *messages.Dispatch, out *gitops.Output, assertCurrent func() error) (gitops.ImportReport, error) {
	repo, _, _, err := g.repoPath(d)
	if err != nil {
		return gitops.ImportReport{}, err
	}
	return gitops.ImportResult(ctx, g.Runner, gitops.ImportRequest{
		RepoPath:         repo,
		StateRoot:        g.StateRoot,
		AttemptID:        d.AttemptID(),
		WorktreeKey:      d.Lease.WorktreeKey,
		InputCommitSHA:   out.Manifest.InputCommitSHA,
		ResultCommitSHA:  *out.Manifest.ResultCommitSHA,
		BundlePath:       out.BundlePath,
		ManagedNamespace: g.ManagedNamespace,
		Squash:           d.Task.Squash(),
		AssertCurrent:    assertCurrent,
		// A result to be pushed gets the operator's identity here, under
		// --publish-author-policy rewrite: the managed branch and the
		// remote then hold the same commits.
		RewriteIdentity: g.PublishPolicy.RewriteIdentity(d.Sandbox.PublicationMode == messages.PublicationBridgePush),
	})
}

// Publish pushes the imported result to the credential's remote under the
// repository lock, fenced by assertCurrent before and after the push.
func (g GitHost) Publish(ctx context.Context, d *messages.Dispatch, inputSHA, resultSHA string, credential gitops.Credential, assertCurrent func() error) (gitops.PublishResult, error) {
	repo, _, _, err := g.repoPath(d)
	if err != nil {
		return gitops.PublishResult{}, err
	}
	release, err := gitops.AcquireRepoLock(ctx, g.StateRoot, repo)
	if err != nil {
		return gitops.PublishResult{}, err
	}
	defer release() //nolint:errcheck // unlocking a held flock cannot meaningfully fail
	return gitops.Publish(ctx, g.Runner, gitops.PublishRequest{
		RepoPath:        repo,
		Branch:          d.Lease.WorktreeKey,
		InputCommitSHA:  inputSHA,
		ResultCommitSHA: resultSHA,
		Credential:      credential,
		AssertCurrent:   assertCurrent,
		ValidateRemote:  g.ValidateRemote,
		Policy:          g.PublishPolicy,
	})
}
