package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// gitCallingCheck is a git port whose import and publication only call the
// check they are given, as the trusted git layer does before a branch
// moves.
type gitCallingCheck struct{ actors.Git }

func (gitCallingCheck) ImportResult(_ context.Context, _ *messages.Dispatch, _ *gitops.Output, check func() error) (gitops.ImportReport, error) {
	return gitops.ImportReport{}, check()
}

func (gitCallingCheck) Publish(_ context.Context, _ *messages.Dispatch, _, _ string, _ gitops.Credential, check func() error) (gitops.PublishResult, error) {
	return gitops.PublishResult{}, check()
}

// TestFencedGitAsksTheFenceAfterTheAttemptsOwnCheck: the fence is asked,
// with the attempt's id, before an import and before a publication, after
// the attempt's own check; a refusal by either stops the step, and a
// refusal by the attempt's own check does not consult the fence.
func TestFencedGitAsksTheFenceAfterTheAttemptsOwnCheck(t *testing.T) {
	d := &messages.Dispatch{}
	d.Sandbox.DispatchAttemptID = "attempt-1"
	var asked []string
	fenceErr := errors.New("declared lost")
	g := fencedGit{Git: gitCallingCheck{}, fence: func(_ context.Context, id string) error {
		asked = append(asked, id)
		return fenceErr
	}}
	ok := func() error { return nil }
	_, err := g.ImportResult(context.Background(), d, nil, ok)
	require.ErrorIs(t, err, fenceErr)
	_, err = g.Publish(context.Background(), d, "", "", gitops.Credential{}, ok)
	require.ErrorIs(t, err, fenceErr)
	assert.Equal(t, []string{d.AttemptID(), d.AttemptID()}, asked)

	stale := errors.New("stale")
	_, err = g.ImportResult(context.Background(), d, nil, func() error { return stale })
	require.ErrorIs(t, err, stale)
	assert.Len(t, asked, 2, "the fence is not asked once the attempt's own check refused")

	g.fence = func(context.Context, string) error { return nil }
	_, err = g.ImportResult(context.Background(), d, nil, ok)
	require.NoError(t, err)
}
