package dockerops

import (
	"context"
	"io"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeInspector struct {
	state   *container.State
	stats   string
	inspect int
	errs    []error
}

func (f *fakeInspector) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	f.inspect++
	if f.inspect <= len(f.errs) {
		return container.InspectResponse{}, f.errs[f.inspect-1]
	}
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{State: f.state}}, nil
}

func (f *fakeInspector) ContainerStatsOneShot(context.Context, string) (container.StatsResponseReader, error) {
	return container.StatsResponseReader{Body: io.NopCloser(strings.NewReader(f.stats))}, nil
}

func TestInspectState(t *testing.T) {
	f := &fakeInspector{
		state: &container.State{Status: "exited", OOMKilled: true, ExitCode: 137, Error: "boom"},
		errs:  []error{cerrdefs.ErrInternal}, // a read: retried
	}
	state, err := newClient(fastOptions(), f).InspectState(context.Background(), "c")
	require.NoError(t, err)
	assert.Equal(t, ContainerState{OOMKilled: true, ExitCode: 137, Error: "boom", Status: "exited"}, state)
	assert.Equal(t, 2, f.inspect)

	f = &fakeInspector{errs: []error{cerrdefs.ErrNotFound}}
	_, err = newClient(fastOptions(), f).InspectState(context.Background(), "c")
	assert.True(t, cerrdefs.IsNotFound(err))
	assert.Contains(t, err.Error(), "container inspect c: ")
	assert.Equal(t, 1, f.inspect)
}

func TestMemoryUsage(t *testing.T) {
	for stats, want := range map[string]uint64{
		`{"memory_stats":{"usage":1000,"stats":{"total_inactive_file":300,"inactive_file":100,"cache":600}}}`: 700,
		`{"memory_stats":{"usage":1000,"stats":{"cache":600}}}`:                                               400,
		`{"memory_stats":{"usage":1000,"stats":{"inactive_file":250}}}`:                                       750,
		`{"memory_stats":{"usage":1000,"stats":{"total_inactive_file":5000}}}`:                                1000,
		`{"memory_stats":{"usage":1000}}`:                                                                     1000,
		`{"memory_stats":{}}`:                                                                                 0,
	} {
		got, err := newClient(fastOptions(), &fakeInspector{stats: stats}).MemoryUsage(context.Background(), "c")
		require.NoError(t, err)
		assert.Equal(t, want, got, stats)
	}
	_, err := newClient(fastOptions(), &fakeInspector{stats: "not json"}).MemoryUsage(context.Background(), "c")
	assert.Error(t, err)
}
