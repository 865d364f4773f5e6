package actors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// expectEvent waits for (and takes) the attempt's event of eventType.
func expectEvent(t *testing.T, p *actortest.Probe, eventType string) messages.Event {
	t.Helper()
	return actortest.ExpectWhere(t, p, within, func(ev messages.AttemptEvent) bool { return ev.Event.EventType == eventType }).Event
}

func eventData(t *testing.T, ev messages.Event) map[string]any {
	t.Helper()
	require.NotNil(t, ev.Data)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(*ev.Data), &m))
	return m
}

// The build reports a cache miss, its place in the permit queue, its start
// and completion (with duration and the stored log's digest), and stores
// the log 0600 under the state root.
func TestBuildEventsAndPermitQueuePosition(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.imageFound = false
	host.buildGate = make(chan struct{})
	h := newHarness(t, host, nil)
	first := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	expectEvent(t, first, "sandbox_build_started")

	second := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	waiting := expectEvent(t, second, "sandbox_build_waiting")
	assert.Equal(t, float64(1), eventData(t, waiting)["queuePosition"])
	close(host.buildGate)

	for _, p := range []*actortest.Probe{first, second} {
		out := actortest.Expect[messages.AttemptFinished](t, p, within).Outcome
		assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	}
	completed := eventData(t, expectEvent(t, first, "sandbox_build_completed"))
	assert.Subset(t, eventTypes(first), []string{"sandbox_image_cache_miss", "sandbox_image_built"})
	assert.NotContains(t, eventTypes(second), "sandbox_build_started", "the second attempt shares the first one's image")
	assert.Contains(t, eventTypes(second), "sandbox_image_cache_hit")
	// The seed's event for having waited on another attempt's build.
	waited := eventData(t, expectEvent(t, second, "sandbox_build_singleflight_wait"))
	assert.Equal(t, completed["cacheKey"], waited["cacheKey"])
	assert.Contains(t, waited["imageDigest"], "sha256:", "the image the wait ended with (the fake cache answers sha256:cached)")
	assert.Contains(t, waited, "durationMs")
	assert.NotContains(t, eventTypes(first), "sandbox_build_singleflight_wait", "the first attempt built the image itself")

	log := completed["buildLog"].(map[string]any)
	assert.Contains(t, log["digest"], "sha256:")
	assert.Contains(t, log["tail"], "Step 1/1 : FROM scratch")
	assert.Contains(t, completed, "durationMs")
	stored, err := filepath.Glob(filepath.Join(h.state, "build-logs", completed["cacheKey"].(string), "*.log"))
	require.NoError(t, err)
	require.Len(t, stored, 1)
	info, err := os.Stat(stored[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// A Dockerfile the policy refuses fails the attempt before the cache is
// even looked up, naming the line.
func TestDockerfilePolicyRefusesBeforeTheBuild(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.imageFound = false
	host.dockerfile = "FROM scratch\n# fetches at build time\nADD https://example.com/tool.tgz /opt/\n"
	out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
	assert.Equal(t, string(failure.SandboxBuildPolicy), out.Code)
	assert.Contains(t, out.Message, "line 3")
	assert.Zero(t, host.called("lookup")+host.called("build")+host.called("network"))
}

// An attempt holds its image key from the cache lookup until it stops, so
// that an image collection leaves the key alone meanwhile.
func TestAttemptHoldsItsImageKey(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	require.Len(t, h.refs.InUse(), 1, "the running attempt holds its key")
	_, err := h.system.Root.RequestFuture(h.root, messages.CancelAttempt{AttemptID: d.AttemptID(), Reason: "test"}, within).Result()
	require.NoError(t, err)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
	require.Eventually(t, func() bool { return len(h.refs.InUse()) == 0 }, within, 5*time.Millisecond, "released when the attempt stops")
}

// An attempt stopped while its cache lookup waits for an image collection
// of its key leaves no lookup behind: the wait ends with the attempt, and
// no reference is taken after the attempt released its own, so the next
// collection may remove the image (issue 25).
func TestStoppedAttemptTakesNoImageReferenceAfterItsRelease(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := newHarness(t, host, nil)
	first := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	key := eventData(t, expectEvent(t, first, "sandbox_image_cache_hit"))["cacheKey"].(string)
	actortest.Expect[messages.AttemptFinished](t, first, within)
	require.Eventually(t, func() bool { return len(h.refs.InUse()) == 0 }, within, 5*time.Millisecond)

	// A collection of the key, removing until the test ends it.
	removing, endRemoval, collected := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(collected)
		ran, err := h.refs.IfUnused(key, func() error { close(removing); <-endRemoval; return nil })
		assert.True(t, ran)
		assert.NoError(t, err)
	}()
	<-removing
	var once sync.Once
	endCollection := func() { once.Do(func() { close(endRemoval); <-collected }) }
	t.Cleanup(endCollection)

	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	expectEvent(t, probe, "sandbox_input_prepared") // the build actor is spawned: its lookup waits for the collection
	h.cancel(t, d)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.StatusCancelled, out.Status, out.Message)
	require.Eventually(t, func() bool { return !goroutineIn("imagegc.(*Refs).Acquire") }, within, 5*time.Millisecond,
		"a lookup of a stopped attempt still waits to take the key")

	endCollection()
	assert.Empty(t, h.refs.InUse(), "nothing holds the key once its attempts stopped")
}

// goroutineIn reports whether a goroutine runs fn now.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// The build context is written only by a build: a cache hit never writes
// it, a miss writes it once, before the build.
func TestBuildContextIsWrittenOnlyForABuild(t *testing.T) {
	hit := newFakeHost(t.TempDir())
	out := newHarness(t, hit, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Zero(t, hit.called("context"), "a cache hit writes no build context")

	miss := newFakeHost(t.TempDir())
	miss.imageFound = false
	out = newHarness(t, miss, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Equal(t, 1, miss.called("context"))
	assert.Less(t, miss.index("context"), miss.index("build"))
}

// A build context the git refuses (its digest is not the one the image key
// was made of, say) fails the attempt with the input's code, and nothing
// is built under the key.
func TestBuildRefusesAContextThatIsNotTheKeys(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.imageFound = false
	host.fail["context"] = failure.New(failure.SandboxInputFailed, "the build context has digest x, not the digest y the image key was made of: refusing to build")
	out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxInputFailed), out.Code)
	assert.Contains(t, out.Message, "refusing to build")
	assert.Zero(t, host.called("build"), "nothing is built")
}
