package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func bridgePush(d *messages.Dispatch) *messages.Dispatch {
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
	return d
}

func TestBridgePushPublishesTheImportedResult(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := newHarness(t, host, nil)
	h.redeemer = host
	out := h.run(t, bridgePush(testDispatch(time.Now().Add(time.Hour))))
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Equal(t, out.ResultCommitSHA, out.PublishedCommitSHA)
	assert.Equal(t, 1, host.called("redeem"))
	assert.Equal(t, 1, host.called("publish"))
	assert.Equal(t, 1, host.teardowns)
}

func TestBridgePushFailuresAndRefusals(t *testing.T) {
	t.Run("no redeemer: refused before anything", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		out := newHarness(t, host, nil).run(t, bridgePush(testDispatch(time.Now().Add(time.Hour))))
		assert.Equal(t, string(failure.SandboxOutputPublishForbid), out.Code)
		assert.Zero(t, host.called("prepare"))
	})
	t.Run("redemption refused", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.fail["redeem"] = assert.AnError
		h := newHarness(t, host, nil)
		h.redeemer = host
		out := h.run(t, bridgePush(testDispatch(time.Now().Add(time.Hour))))
		assert.Equal(t, string(failure.SandboxOutputPublishForbid), out.Code)
		assert.Equal(t, messages.PhasePublishing, out.Phase)
		assert.Zero(t, host.called("publish"))
		assert.Equal(t, 1, host.teardowns)
	})
	t.Run("remote moved", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.fail["publish"] = failure.New(failure.SandboxOutputPublishStale, "remote branch changed")
		h := newHarness(t, host, nil)
		h.redeemer = host
		out := h.run(t, bridgePush(testDispatch(time.Now().Add(time.Hour))))
		assert.Equal(t, string(failure.SandboxOutputPublishStale), out.Code)
		assert.Empty(t, out.PublishedCommitSHA)
	})
	t.Run("a failed task is never published", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 1
		h := newHarness(t, host, nil)
		h.redeemer = host
		out := h.run(t, bridgePush(testDispatch(time.Now().Add(time.Hour))))
		assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code)
		assert.Zero(t, host.called("redeem"))
	})
}
