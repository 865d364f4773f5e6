package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

type publishDone struct {
	pushed bool
	err    error
}

// startPublish redeems the dispatch's publication grant for a credential
// and pushes the imported result to the remote, fenced before and after
// the push exactly as the branch move is.
func (a *attemptActor) startPublish(ctx actor.Context) {
	a.setPhase(ctx, messages.PhasePublishing)
	req := PublicationRequest{
		DispatchAttemptID: a.d.AttemptID(),
		ExecutionLeaseID:  a.d.Sandbox.ExecutionLeaseID,
		FencingToken:      a.d.Lease.FencingToken,
		RunnerInstanceID:  a.d.Sandbox.RunnerInstanceID,
		GrantID:           a.d.Sandbox.PublishGrant.GrantID,
		Branch:            a.d.Sandbox.PublishGrant.Branch,
		ResultCommitSHA:   a.result,
	}
	input := a.prepared.InputCommitSHA
	a.step(ctx, "publish", func(stepCtx context.Context) any {
		credential, err := a.deps.Redeemer.Redeem(stepCtx, req)
		if err != nil {
			if failure.CodeOf(err) == "" {
				err = failure.WrapWithheld(failure.SandboxOutputPublishForbid, err, "redeem the publication grant") // the redeemer's words may carry the grant
			}
			return publishDone{err: err}
		}
		result, err := a.deps.Git.Publish(stepCtx, a.d, input, req.ResultCommitSHA, credential,
			func() error { return a.fence.assertCurrent(a.d.Lease.FencingToken) })
		return publishDone{pushed: result.Pushed, err: err}
	})
}

func (a *attemptActor) onPublished(ctx actor.Context, msg publishDone) {
	if msg.err != nil {
		a.fail(msg.err)
		a.advance(ctx)
		return
	}
	a.published = a.result
	content := "Published the exact fenced result commit."
	if !msg.pushed {
		content = "The remote branch already held the result commit."
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_remote_published", content, map[string]any{
		"grantId": a.d.Sandbox.PublishGrant.GrantID, "branch": a.d.Sandbox.PublishGrant.Branch,
		"resultCommitSha": a.result, "pushed": msg.pushed,
	}))
	a.pipelineDone = true
	a.advance(ctx)
}
