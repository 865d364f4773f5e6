package reaper

import (
	"context"
	"errors"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
)

// fakeEngine records calls and answers from canned data.
type fakeEngine struct {
	calls      []string
	filters    []string
	removeErr  error
	deadlines  []bool
	containers []container.Summary
	networks   []network.Summary
	volumes    []*volume.Volume
}

func (f *fakeEngine) note(ctx context.Context, call string) {
	_, ok := ctx.Deadline()
	f.calls = append(f.calls, call)
	f.deadlines = append(f.deadlines, ok)
}

func (f *fakeEngine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	f.note(ctx, "container list")
	if !o.All {
		return nil, errors.New("must list stopped containers too")
	}
	f.filters = append(f.filters, o.Filters.Get("label")...)
	return f.containers, nil
}

func (f *fakeEngine) ContainerStop(ctx context.Context, id string, o container.StopOptions) error {
	f.note(ctx, "container stop "+id)
	return cerrdefs.ErrNotFound
}

func (f *fakeEngine) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	f.note(ctx, "container remove "+id)
	if !o.Force || o.RemoveVolumes {
		return errors.New("wrong remove options")
	}
	return f.removeErr
}

func (f *fakeEngine) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	f.note(ctx, "network list")
	f.filters = append(f.filters, o.Filters.Get("label")...)
	return f.networks, nil
}

func (f *fakeEngine) NetworkRemove(ctx context.Context, id string) error {
	f.note(ctx, "network remove "+id)
	return f.removeErr
}

func (f *fakeEngine) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	f.note(ctx, "volume list")
	f.filters = append(f.filters, o.Filters.Get("label")...)
	return volume.ListResponse{Volumes: f.volumes}, nil
}

func (f *fakeEngine) VolumeRemove(ctx context.Context, id string, force bool) error {
	f.note(ctx, "volume remove "+id)
	return f.removeErr
}

func TestAdapterListsManagedObjects(t *testing.T) {
	created := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	labels := map[string]string{dockerops.LabelManaged: "true"}
	engine := &fakeEngine{
		containers: []container.Summary{{ID: "c1", Names: []string{"/forge-agent-1"}, Labels: labels, Created: created.Unix()}},
		networks:   []network.Summary{{ID: "n1", Name: "forge-1", Labels: labels, Created: created.Add(time.Millisecond)}},
		volumes: []*volume.Volume{
			{Name: "forge-1-workspace", Labels: labels, CreatedAt: "2030-01-01T12:00:00+02:00"},
			{Name: "forge-1-control", Labels: labels, CreatedAt: "yesterday"},
			nil,
		},
	}
	a := NewDockerAdapter(nil, engine, Timeouts{})
	objs, err := a.ListManaged(context.Background())
	require.NoError(t, err)
	require.Equal(t, []Object{
		{Kind: KindContainer, ID: "c1", Name: "forge-agent-1", Labels: labels, Created: created},
		{Kind: KindNetwork, ID: "n1", Name: "forge-1", Labels: labels, Created: created.Add(time.Millisecond)},
		{Kind: KindVolume, ID: "forge-1-workspace", Name: "forge-1-workspace", Labels: labels, Created: created},
		{Kind: KindVolume, ID: "forge-1-control", Name: "forge-1-control", Labels: labels},
	}, objs)
	require.Equal(t, []string{"dev.forge.managed=true", "dev.forge.managed=true", "dev.forge.managed=true"}, engine.filters)
	require.Equal(t, []bool{true, true, true}, engine.deadlines, "every call has its own deadline")
}

func TestAdapterRemoves(t *testing.T) {
	engine := &fakeEngine{removeErr: cerrdefs.ErrNotFound}
	a := NewDockerAdapter(nil, engine, Timeouts{})
	ctx := context.Background()
	require.NoError(t, a.Remove(ctx, Object{Kind: KindContainer, ID: "c1"}), "not found is success")
	require.NoError(t, a.Remove(ctx, Object{Kind: KindNetwork, ID: "n1"}))
	require.NoError(t, a.Remove(ctx, Object{Kind: KindVolume, ID: "v1"}))
	require.Equal(t, []string{"container stop c1", "container remove c1", "network remove n1", "volume remove v1"}, engine.calls)
	require.NotContains(t, engine.deadlines, false)

	engine.removeErr = errors.New("volume is in use")
	err := a.Remove(ctx, Object{Kind: KindVolume, ID: "v1"})
	require.ErrorContains(t, err, "volume is in use")
	require.Error(t, a.Remove(ctx, Object{Kind: "image", ID: "i1"}))
}
