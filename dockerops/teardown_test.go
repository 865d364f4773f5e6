package dockerops

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// fakeEngineObjects is an in-memory teardownAPI: objects are listed by
// label filter and removed unless an error is scripted for them.
type fakeEngineObjects struct {
	mu         sync.Mutex
	objects    map[string]labelled // by kind+id
	removeErrs map[string][]error  // successive remove errors by id
	listErr    error
	log        []string
}

func newFakeObjects(objs ...labelled) *fakeEngineObjects {
	f := &fakeEngineObjects{objects: map[string]labelled{}, removeErrs: map[string][]error{}}
	for _, o := range objs {
		f.objects[o.kind+"/"+o.id] = o
	}
	return f
}

func (f *fakeEngineObjects) list(kind string, args interface{ Get(string) []string }) []labelled {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []labelled
	for _, o := range f.objects {
		if o.kind != kind {
			continue
		}
		ok := true
		for _, l := range args.Get("label") {
			k, v, _ := strings.Cut(l, "=")
			if o.labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b labelled) int { return strings.Compare(a.id, b.id) })
	return out
}

func (f *fakeEngineObjects) remove(kind, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "remove "+kind+" "+id)
	if errs := f.removeErrs[id]; len(errs) > 0 {
		f.removeErrs[id] = errs[1:]
		if errs[0] != nil {
			return errs[0]
		}
	}
	if _, ok := f.objects[kind+"/"+id]; !ok {
		return cerrdefs.ErrNotFound
	}
	delete(f.objects, kind+"/"+id)
	return nil
}

func (f *fakeEngineObjects) ContainerList(_ context.Context, o container.ListOptions) ([]container.Summary, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []container.Summary
	for _, obj := range f.list(ResourceContainer, o.Filters) {
		out = append(out, container.Summary{ID: obj.id, Labels: obj.labels})
	}
	return out, nil
}

func (f *fakeEngineObjects) ContainerStop(_ context.Context, id string, _ container.StopOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "stop container "+id)
	return nil
}

func (f *fakeEngineObjects) ContainerRemove(_ context.Context, id string, o container.RemoveOptions) error {
	if !o.Force || o.RemoveVolumes {
		panic("containers are force-removed, keeping volumes")
	}
	return f.remove(ResourceContainer, id)
}

func (f *fakeEngineObjects) NetworkList(_ context.Context, o network.ListOptions) ([]network.Summary, error) {
	var out []network.Summary
	for _, obj := range f.list(ResourceNetwork, o.Filters) {
		out = append(out, network.Summary{ID: obj.id, Labels: obj.labels})
	}
	return out, nil
}

func (f *fakeEngineObjects) NetworkRemove(_ context.Context, id string) error {
	return f.remove(ResourceNetwork, id)
}

func (f *fakeEngineObjects) VolumeList(_ context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	var out volume.ListResponse
	for _, obj := range f.list(ResourceVolume, o.Filters) {
		out.Volumes = append(out.Volumes, &volume.Volume{Name: obj.id, Labels: obj.labels})
	}
	return out, nil
}

func (f *fakeEngineObjects) VolumeRemove(_ context.Context, id string, _ bool) error {
	return f.remove(ResourceVolume, id)
}

func ownedObjects(t *testing.T) (Ownership, map[string]string, []labelled) {
	d := fixedDispatch()
	labels, err := Labels(d, "i", "c")
	require.NoError(t, err)
	return OwnershipOf(d), labels, []labelled{
		{kind: ResourceVolume, id: "vol-a", labels: labels},
		{kind: ResourceNetwork, id: "net-a", labels: labels},
		{kind: ResourceContainer, id: "ctr-a", labels: labels},
		{kind: ResourceVolume, id: "vol-b", labels: labels},
	}
}

func TestTeardownRemovesInOrderAndIsIdempotent(t *testing.T) {
	owner, _, objs := ownedObjects(t)
	f := newFakeObjects(objs...)
	c := newClient(fastOptions(), f)

	// A cancelled caller context does not prevent the cleanup.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	report, err := c.Teardown(ctx, owner, "teardown")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"stop container ctr-a", "remove container ctr-a", "remove network net-a", "remove volume vol-a", "remove volume vol-b",
	}, f.log)
	require.Len(t, report.Actions, 4)
	for _, a := range report.Actions {
		assert.Equal(t, OutcomeRemoved, a.Outcome)
		assert.Empty(t, a.Message)
		assert.Equal(t, owner.AttemptID, a.DispatchAttemptID)
	}
	assert.Zero(t, report.Remaining)
	assert.Equal(t, "teardown", report.Source)

	again, err := c.Teardown(context.Background(), owner, "teardown")
	require.NoError(t, err)
	assert.Empty(t, again.Actions)
	assert.NotNil(t, again.Actions, "encodes as [] not null")
	assert.NotEqual(t, report.ReportID, again.ReportID)
}

func TestTeardownNotFoundIsRemovedAndTransientIsRetried(t *testing.T) {
	owner, _, objs := ownedObjects(t)
	f := newFakeObjects(objs...)
	f.removeErrs["vol-a"] = []error{cerrdefs.ErrNotFound}    // gone meanwhile
	f.removeErrs["net-a"] = []error{cerrdefs.ErrUnavailable} // flaky once
	delete(f.objects, ResourceVolume+"/vol-a")
	report, err := newClient(fastOptions(), f).Teardown(context.Background(), owner, "reaper")
	require.NoError(t, err)
	assert.Len(t, report.Actions, 3, "vol-a was already gone when listed")
	assert.Equal(t, 2, strings.Count(strings.Join(f.log, ","), "remove network net-a"))
}

func TestTeardownReportsFailuresAndForeignObjects(t *testing.T) {
	owner, labels, objs := ownedObjects(t)
	foreign := clone(labels)
	foreign[LabelFencingToken] = "00000000-0000-4000-8000-0000000000ff"
	objs = append(objs, labelled{kind: ResourceVolume, id: "vol-foreign", labels: foreign})
	f := newFakeObjects(objs...)
	f.removeErrs["vol-b"] = []error{cerrdefs.ErrConflict} // in use: permanent
	report, err := newClient(fastOptions(), f).Teardown(context.Background(), owner, "teardown")
	require.Error(t, err)
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(err))
	assert.Equal(t, 2, report.Remaining)
	assert.NotContains(t, f.log, "remove volume vol-foreign")
	assert.Equal(t, 1, strings.Count(strings.Join(f.log, ","), "remove volume vol-b"), "conflicts are not retried")

	outcomes := map[string]string{}
	for _, a := range report.Actions {
		outcomes[a.ResourceID] = a.Outcome + ": " + a.Message
	}
	assert.Equal(t, "removed: ", outcomes["ctr-a"])
	assert.Contains(t, outcomes["vol-b"], "failed: volume remove vol-b")
	assert.Equal(t, "failed: "+msgForeignRemains, outcomes["vol-foreign"])
	assert.Len(t, report.Actions, 5, "a failed removal is not reported twice")

	raw, err := json.Marshal(report.Actions[0])
	require.NoError(t, err)
	for _, key := range []string{"dispatchAttemptId", "fencingToken", "runnerInstanceId", "resourceType", "resourceId", "outcome", "occurredAt"} {
		assert.Contains(t, string(raw), `"`+key+`"`)
	}
}

func TestTeardownListFailureAndInvalidOwner(t *testing.T) {
	owner, _, objs := ownedObjects(t)
	f := newFakeObjects(objs...)
	f.listErr = cerrdefs.ErrInvalidArgument
	report, err := newClient(fastOptions(), f).Teardown(context.Background(), owner, "teardown")
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(err))
	assert.True(t, report.RemainingUnknown, "an engine that cannot be listed leaves the remainder unknown, not zero")
	assert.ErrorIs(t, err, cerrdefs.ErrInvalidArgument, "the cause is kept")

	_, err = newClient(fastOptions(), newFakeObjects()).Teardown(context.Background(), Ownership{}, "teardown")
	assert.Equal(t, failure.SandboxIdentityInvalid, failure.CodeOf(err))
}

func TestListAndRemoveManaged(t *testing.T) {
	_, _, objs := ownedObjects(t)
	f := newFakeObjects(objs...)
	c := newClient(fastOptions(), f)
	got, err := c.ListManaged(context.Background())
	require.NoError(t, err)
	require.Len(t, got, len(objs))
	for _, obj := range got {
		require.NoError(t, c.RemoveManaged(context.Background(), obj))
	}
	left, err := c.ListManaged(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left)
	require.NoError(t, c.RemoveManaged(context.Background(), got[0]), "removing what is gone succeeds")
}
