package actors

import (
	"context"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// GitHost is the production Git: gitops on the host repository, holding
// the per-repository coordinator lock around preparation, the import's
// branch move and publication, so that no two attempts (in this or another
// forged process) interleave their ref updates.
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
}

// Prepare bundles the input and archives the build context.
func (g GitHost) Prepare(ctx context.Context, d *messages.Dispatch, workDir string) (*gitops.Prepared, error) {
	release, err := gitops.AcquireRepoLock(ctx, g.StateRoot, d.Repo.LocalPath)
	if err != nil {
		return nil, err
	}
	defer release() //nolint:errcheck // unlocking a held flock cannot meaningfully fail
	return gitops.Prepare(ctx, g.Runner, gitops.PrepareRequest{
		RepoPath:          d.Repo.LocalPath,
		AttemptID:         d.AttemptID(),
		WorktreeKey:       d.Lease.WorktreeKey,
		BaseBranch:        d.BaseBranch,
		DefaultBranch:     d.Repo.DefaultBranch,
		ExecutionPolicy:   d.Sandbox.ExecutionPolicy,
		ApprovedConfigSHA: d.Sandbox.SandboxConfigCommitSHA,
		WorkDir:           workDir,
	})
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
	return gitops.ImportResult(ctx, g.Runner, gitops.ImportRequest{
		RepoPath:         d.Repo.LocalPath,
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
	release, err := gitops.AcquireRepoLock(ctx, g.StateRoot, d.Repo.LocalPath)
	if err != nil {
		return gitops.PublishResult{}, err
	}
	defer release() //nolint:errcheck // unlocking a held flock cannot meaningfully fail
	return gitops.Publish(ctx, g.Runner, gitops.PublishRequest{
		RepoPath:        d.Repo.LocalPath,
		Branch:          d.Lease.WorktreeKey,
		InputCommitSHA:  inputSHA,
		ResultCommitSHA: resultSHA,
		Credential:      credential,
		AssertCurrent:   assertCurrent,
		ValidateRemote:  g.ValidateRemote,
		Policy:          g.PublishPolicy,
	})
}
