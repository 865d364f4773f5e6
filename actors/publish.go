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
	req := messages.PublicationRequest{
		DispatchAttemptID: a.d.AttemptID(),
		ExecutionLeaseID:  a.d.Sandbox.ExecutionLeaseID,
		FencingToken:      a.d.Lease.FencingToken,
		RunnerInstanceID:  a.d.Sandbox.RunnerInstanceID,
		GrantID:           a.d.Sandbox.PublishGrant.GrantID,
		Branch:            a.d.Sandbox.PublishGrant.Branch,
		ResultCommitSHA:   a.verdict.result,
	}
	in := publishInput{redeemer: a.deps.Redeemer, git: a.deps.Git, d: a.d, input: a.in.prepared.InputCommitSHA, req: req, fence: a.fence}
	a.step(ctx, "publish", func(stepCtx context.Context) any { return publishStep(stepCtx, in) })
}

// publishInput is what the publish step reads.
type publishInput struct {
	redeemer CredentialRedeemer
	git      Git
	d        *messages.Dispatch
	input    string // the input commit: the remote branch must still be there
	req      messages.PublicationRequest
	fence    *fence
}

// publishStep redeems the grant and pushes the exact result commit, fenced
// before and after the push.
func publishStep(ctx context.Context, in publishInput) publishDone {
	credential, err := in.redeemer.Redeem(ctx, in.req)
	if err != nil {
		if failure.CodeOf(err) == "" {
			err = failure.WrapWithheld(failure.SandboxOutputPublishForbid, err, "redeem the publication grant") // the redeemer's words may carry the grant
		}
		return publishDone{err: err}
	}
	token := in.d.Lease.FencingToken
	result, err := in.git.Publish(ctx, in.d, in.input, in.req.ResultCommitSHA, credential,
		func() error { return in.fence.assertCurrent(token) })
	return publishDone{pushed: result.Pushed, err: err}
}

func (a *attemptActor) onPublished(ctx actor.Context, msg publishDone) {
	if msg.err != nil {
		a.fail(msg.err)
		a.advance(ctx)
		return
	}
	a.verdict.published = a.verdict.result
	content := "Published the exact fenced result commit."
	if !msg.pushed {
		content = "The remote branch already held the result commit."
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_remote_published", content, map[string]any{
		"grantId": a.d.Sandbox.PublishGrant.GrantID, "branch": a.d.Sandbox.PublishGrant.Branch,
		"resultCommitSha": a.verdict.result, "pushed": msg.pushed,
	}))
	a.verdict.pipelineDone = true
	a.advance(ctx)
}
