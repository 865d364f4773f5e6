package runner

import (
	"context"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// fencedGit is the attempts' git port with Config.Fence asked before each
// irreversible step: the import of a result and its publication. The
// attempt's own check (lease, fencing token, cancellation) runs first.
type fencedGit struct {
	actors.Git
	fence func(ctx context.Context, attemptID string) error
}

func (g fencedGit) check(ctx context.Context, d *messages.Dispatch, assertCurrent func() error) func() error {
	return func() error {
		if err := assertCurrent(); err != nil {
			return err
		}
		return g.fence(ctx, d.AttemptID())
	}
}

func (g fencedGit) ImportResult(ctx context.Context, d *messages.Dispatch, out *gitops.Output, assertCurrent func() error) (gitops.ImportReport, error) {
	return g.Git.ImportResult(ctx, d, out, g.check(ctx, d, assertCurrent))
}

func (g fencedGit) Publish(ctx context.Context, d *messages.Dispatch, inputSHA, resultSHA string, credential gitops.Credential, assertCurrent func() error) (gitops.PublishResult, error) {
	return g.Git.Publish(ctx, d, inputSHA, resultSHA, credential, g.check(ctx, d, assertCurrent))
}
