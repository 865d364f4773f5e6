package dockerops

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/failure"
)

// teardownWorld is one attempt's objects on a fake engine (served over a
// unix socket to the real engine client), named as in the engine.
type teardownWorld struct {
	engine *fakeengine.Engine
	client *Client
	owner  Ownership
	labels map[string]string
	names  map[string]string // engine id → name
	ids    map[string]string // name → engine id
}

// newTeardownWorld seeds a container, a network and two volumes of one
// attempt (and whatever extra names the test adds with add).
func newTeardownWorld(t *testing.T, seed ...string) *teardownWorld {
	t.Helper()
	d := fixedDispatch()
	labels, err := Labels(d, "i", "c")
	require.NoError(t, err)
	w := &teardownWorld{engine: fakeengine.New(t), owner: OwnershipOf(d), labels: labels, names: map[string]string{}, ids: map[string]string{}}
	if len(seed) == 0 {
		seed = []string{"vol-a", "net-a", "ctr-a", "vol-b"}
	}
	for _, name := range seed {
		w.add(name, labels)
	}
	opts := fastOptions()
	opts.Host = w.engine.Host()
	w.client, err = Connect(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.client.Close() })
	return w
}

// add seeds one object; its kind is its name's prefix (ctr-, net-, vol-).
func (w *teardownWorld) add(name string, labels map[string]string) {
	var id string
	switch {
	case strings.HasPrefix(name, "ctr-"):
		id = w.engine.AddContainer(name, labels, fakeengine.Block())
	case strings.HasPrefix(name, "net-"):
		id = w.engine.AddNetwork(name, labels)
	default:
		id = w.engine.AddVolume(name, labels)
	}
	w.names[id], w.ids[name] = name, id
}

// log is the engine's stop and remove calls, by object name, in order.
func (w *teardownWorld) log() []string {
	var out []string
	for _, c := range w.engine.Calls() {
		segs := strings.Split(strings.Trim(c.Path, "/"), "/")
		switch c.Op {
		case fakeengine.OpContainerStop:
			out = append(out, "stop container "+w.names[segs[1]])
		case fakeengine.OpContainerRemove:
			out = append(out, "remove container "+w.names[segs[1]])
		case fakeengine.OpNetworkRemove:
			out = append(out, "remove network "+w.names[segs[1]])
		case fakeengine.OpVolumeRemove:
			out = append(out, "remove volume "+w.names[segs[1]])
		}
	}
	return out
}

func TestTeardownRemovesInOrderAndIsIdempotent(t *testing.T) {
	w := newTeardownWorld(t)
	w.engine.Container(w.ids["ctr-a"]).Start()

	// A cancelled caller context does not prevent the cleanup.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	report, err := w.client.Teardown(ctx, w.owner, "teardown")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"stop container ctr-a", "remove container ctr-a", "remove network net-a", "remove volume vol-a", "remove volume vol-b",
	}, w.log())
	require.Len(t, report.Actions, 4)
	for _, a := range report.Actions {
		assert.Equal(t, OutcomeRemoved, a.Outcome)
		assert.Empty(t, a.Message)
		assert.Equal(t, w.owner.AttemptID, a.DispatchAttemptID)
	}
	assert.Zero(t, report.Remaining)
	assert.Equal(t, "teardown", report.Source)
	w.engine.AssertClean(t, LabelManaged)

	again, err := w.client.Teardown(context.Background(), w.owner, "teardown")
	require.NoError(t, err)
	assert.Empty(t, again.Actions)
	assert.NotNil(t, again.Actions, "encodes as [] not null")
	assert.NotEqual(t, report.ReportID, again.ReportID)
}

// A container that is not running (created, or exited as a worker has by
// its teardown) is removed without a stop call; a running one beside it is
// stopped first.
func TestTeardownStopsOnlyRunningContainers(t *testing.T) {
	w := newTeardownWorld(t, "ctr-created", "ctr-exited", "ctr-running")
	w.engine.Container(w.ids["ctr-exited"]).Start()
	w.engine.Container(w.ids["ctr-exited"]).Stop()
	require.Equal(t, "exited", string(w.engine.Container(w.ids["ctr-exited"]).State().Status))
	w.engine.Container(w.ids["ctr-running"]).Start()
	require.True(t, w.engine.Container(w.ids["ctr-running"]).State().Running)

	report, err := w.client.Teardown(context.Background(), w.owner, "teardown")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"remove container ctr-created", "remove container ctr-exited", "stop container ctr-running", "remove container ctr-running",
	}, w.log())
	assert.Len(t, report.Actions, 3)
	w.engine.AssertClean(t, LabelManaged)
}

func TestTeardownNotFoundIsRemovedAndTransientIsRetried(t *testing.T) {
	// vol-a is gone before the listing; vol-b goes between the listing and
	// its removal; the engine is briefly unavailable for net-a.
	w := newTeardownWorld(t, "net-a", "ctr-a", "vol-b")
	w.engine.Inject(fakeengine.OpVolumeRemove, fakeengine.Fault{Target: "vol-b", Times: 1, Before: func() { w.engine.Forget("vol-b") }})
	w.engine.Inject(fakeengine.OpNetworkRemove, fakeengine.Fault{Status: http.StatusServiceUnavailable, Target: w.ids["net-a"], Times: 1})
	report, err := w.client.Teardown(context.Background(), w.owner, "reaper")
	require.NoError(t, err)
	assert.Len(t, report.Actions, 3)
	for _, a := range report.Actions {
		assert.Equal(t, OutcomeRemoved, a.Outcome, "not found is removed: %+v", a)
	}
	assert.Equal(t, 2, strings.Count(strings.Join(w.log(), ","), "remove network net-a"))
	w.engine.AssertClean(t, LabelManaged)
}

func TestTeardownReportsFailuresAndForeignObjects(t *testing.T) {
	w := newTeardownWorld(t)
	foreign := clone(w.labels)
	foreign[LabelFencingToken] = "00000000-0000-4000-8000-0000000000ff"
	w.add("vol-foreign", foreign)
	w.engine.Inject(fakeengine.OpVolumeRemove, fakeengine.Fault{Status: http.StatusConflict, Message: "remove vol-b: volume is in use", Target: "vol-b"})
	report, err := w.client.Teardown(context.Background(), w.owner, "teardown")
	require.Error(t, err)
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(err))
	assert.Equal(t, 2, report.Remaining)
	assert.NotContains(t, w.log(), "remove volume vol-foreign")
	assert.Equal(t, 1, strings.Count(strings.Join(w.log(), ","), "remove volume vol-b"), "conflicts are not retried")

	outcomes := map[string]string{}
	for _, a := range report.Actions {
		outcomes[w.names[a.ResourceID]] = a.Outcome + ": " + a.Message
	}
	assert.Equal(t, "removed: ", outcomes["ctr-a"])
	assert.Contains(t, outcomes["vol-b"], "failed: volume remove vol-b")
	assert.Equal(t, "failed: "+msgForeignRemains, outcomes["vol-foreign"])
	assert.Len(t, report.Actions, 5, "a failed removal is not reported twice")
	assert.ElementsMatch(t, []string{"vol-b", "vol-foreign"}, objectNames(w.engine.Labelled(LabelManaged)))

	raw, err := json.Marshal(report.Actions[0])
	require.NoError(t, err)
	for _, key := range []string{"dispatchAttemptId", "fencingToken", "runnerInstanceId", "resourceType", "resourceId", "outcome", "occurredAt"} {
		assert.Contains(t, string(raw), `"`+key+`"`)
	}
}

func objectNames(objs []fakeengine.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

func TestTeardownListFailureAndInvalidOwner(t *testing.T) {
	w := newTeardownWorld(t)
	w.engine.Inject(fakeengine.OpContainerList, fakeengine.Fault{Status: http.StatusBadRequest, Message: "invalid filter"})
	report, err := w.client.Teardown(context.Background(), w.owner, "teardown")
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(err))
	assert.True(t, report.RemainingUnknown, "an engine that cannot be listed leaves the remainder unknown, not zero")
	assert.True(t, cerrdefs.IsInvalidArgument(err), "the cause is kept: %v", err)

	_, err = w.client.Teardown(context.Background(), Ownership{}, "teardown")
	assert.Equal(t, failure.SandboxIdentityInvalid, failure.CodeOf(err))
}

func TestListAndRemoveManaged(t *testing.T) {
	w := newTeardownWorld(t)
	c := w.client
	got, err := c.ListManaged(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 4)
	for _, obj := range got {
		require.NoError(t, c.RemoveManaged(context.Background(), obj))
	}
	left, err := c.ListManaged(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left)
	w.engine.AssertClean(t, LabelManaged)
	require.NoError(t, c.RemoveManaged(context.Background(), got[0]), "removing what is gone succeeds")
}
