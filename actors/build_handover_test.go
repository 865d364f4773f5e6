package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// gatedBuilds makes every image build of host wait until the returned
// function is called (also at the test's end).
func gatedBuilds(t *testing.T, host *fakeHost) (open func()) {
	t.Helper()
	host.imageFound = false
	host.buildGate = make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(host.buildGate) }) }
	t.Cleanup(open)
	return open
}

// expectCancelled waits for the attempt's outcome, which must be cancelled.
func expectCancelled(t *testing.T, p *actortest.Probe) messages.AttemptOutcome {
	t.Helper()
	out := actortest.Expect[messages.AttemptFinished](t, p, within).Outcome
	assert.Equal(t, messages.StatusCancelled, out.Status, out.Message)
	assert.Equal(t, string(failure.SandboxCancelled), out.Code)
	return out
}

// A cancelled attempt's running build is handed, with the permit, to the
// attempt waiting for the same key, which waits for it instead of building
// again: one build (its two stages) for the second attempt, never
// cancelled. Before the hand-over the cancel stopped the build and the
// waiter built the image again from the start.
func TestCancelledBuildIsHandedToAWaiterOfItsKey(t *testing.T) {
	host := newFakeHost(t.TempDir())
	open := gatedBuilds(t, host)
	h := newHarness(t, host, nil)
	d1 := testDispatch(time.Now().Add(time.Hour))
	first := h.submit(t, d1)
	expectEvent(t, first, "sandbox_build_started")
	second := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	expectEvent(t, second, "sandbox_build_waiting")

	h.cancel(t, d1)
	expectCancelled(t, first)
	taken := eventData(t, expectEvent(t, second, "sandbox_build_started"))
	assert.Equal(t, true, taken["handedOver"], "the second attempt took the running build over")

	open()
	done := actortest.Expect[messages.AttemptFinished](t, second, within).Outcome
	assert.Equal(t, messages.StatusSucceeded, done.Status, done.Message)
	assert.Contains(t, eventTypes(second), "sandbox_image_built")
	assert.Equal(t, 2, host.called("build"), "one build of two stages, started once")
	assert.Zero(t, host.called("build cancelled"), "the running build was never cancelled")
	assert.Zero(t, snapshot(t, h).BuildQueue)
}

// The hand-over goes on down the line: each cancelled holder passes the
// build to the next waiter of the key, and the last one gets the image.
func TestHandedOverBuildIsHandedOnAgain(t *testing.T) {
	host := newFakeHost(t.TempDir())
	open := gatedBuilds(t, host)
	h := newHarness(t, host, nil)
	d1, d2 := testDispatch(time.Now().Add(time.Hour)), testDispatch(time.Now().Add(time.Hour))
	first := h.submit(t, d1)
	expectEvent(t, first, "sandbox_build_started")
	second := h.submit(t, d2)
	expectEvent(t, second, "sandbox_build_waiting")
	third := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	expectEvent(t, third, "sandbox_build_waiting")

	h.cancel(t, d1)
	expectCancelled(t, first)
	expectEvent(t, second, "sandbox_build_started")
	h.cancel(t, d2)
	expectCancelled(t, second)
	assert.Equal(t, true, eventData(t, expectEvent(t, third, "sandbox_build_started"))["handedOver"])

	open()
	done := actortest.Expect[messages.AttemptFinished](t, third, within).Outcome
	assert.Equal(t, messages.StatusSucceeded, done.Status, done.Message)
	assert.Equal(t, 2, host.called("build"), "still the one build")
	assert.Zero(t, host.called("build cancelled"))
}

// With no one waiting for its key (the waiter there was gave up first),
// a cancelled attempt's build is cancelled.
func TestCancelledBuildIsCancelledWhenNoOneWaits(t *testing.T) {
	host := newFakeHost(t.TempDir())
	gatedBuilds(t, host)
	h := newHarness(t, host, nil)
	d1, d2 := testDispatch(time.Now().Add(time.Hour)), testDispatch(time.Now().Add(time.Hour))
	first := h.submit(t, d1)
	expectEvent(t, first, "sandbox_build_started")
	second := h.submit(t, d2)
	expectEvent(t, second, "sandbox_build_waiting")
	h.cancel(t, d2)
	expectCancelled(t, second)

	h.cancel(t, d1)
	expectCancelled(t, first)
	require.Eventually(t, func() bool { return host.called("build cancelled") == 1 }, within, 5*time.Millisecond,
		"the build no one waits for is cancelled")
	assert.Equal(t, 1, host.called("build"), "the build stopped in its first stage")
	assert.Zero(t, snapshot(t, h).BuildQueue)
}

func snapshot(t *testing.T, h *harness) messages.Snapshot {
	t.Helper()
	res, err := h.system.Root.RequestFuture(h.root, messages.SnapshotRequest{}, within).Result()
	require.NoError(t, err)
	return res.(messages.Snapshot)
}
