package collector

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/messages"
)

const within = 10 * time.Second

// fakeEngine lists two keys of one project, the older one expired, and
// signals every listing.
type fakeEngine struct {
	now     time.Time
	listed  chan struct{}
	mu      sync.Mutex
	removed []string
}

func (f *fakeEngine) ImageList(context.Context, image.ListOptions) ([]image.Summary, error) {
	f.listed <- struct{}{}
	labels := func(key string) map[string]string {
		return map[string]string{imagegc.LabelManaged: "true", imagegc.LabelProject: "p", imagegc.LabelKey: key, imagegc.LabelKind: "agent"}
	}
	return []image.Summary{
		{ID: "sha256:new", RepoTags: []string{"forge/agent:new"}, Labels: labels("new"), Created: f.now.Unix()},
		{ID: "sha256:old", RepoTags: []string{"forge/agent:old"}, Labels: labels("old"), Created: f.now.Add(-30 * 24 * time.Hour).Unix()},
	}, nil
}

func (f *fakeEngine) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, ref)
	return nil, nil
}

func (f *fakeEngine) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return nil, nil
}

func (f *fakeEngine) removals() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.removed...)
}

type fixture struct {
	system *actor.ActorSystem
	pid    *actor.PID
	clock  *clock.Manual
	engine *fakeEngine

	mu      sync.Mutex
	reports []string // "reason removed err" per OnCollection call
}

func (f *fixture) told() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reports...)
}

func start(t *testing.T, refs *imagegc.Refs, diskLow func(context.Context) (bool, error)) *fixture {
	t.Helper()
	return startEvery(t, time.Hour, refs, diskLow)
}

func startEvery(t *testing.T, interval time.Duration, refs *imagegc.Refs, diskLow func(context.Context) (bool, error)) *fixture {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fixture{system: actor.NewActorSystem(), clock: clock.NewManual(now), engine: &fakeEngine{now: now, listed: make(chan struct{}, 16)}}
	t.Cleanup(f.system.Shutdown)
	onCollection := func(reason string, report imagegc.Report, err error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reports = append(f.reports, fmt.Sprintf("%s %d %v", reason, len(report.Removed)+len(report.Dangling), err))
	}
	f.pid = f.system.Root.Spawn(Props(Config{API: f.engine, Refs: refs, Clock: f.clock, Interval: interval, DiskCheck: time.Minute, DiskLow: diskLow,
		Policy: imagegc.Policy{KeepPerProject: 1, MaxAge: 24 * time.Hour}, OnCollection: onCollection}))
	f.inspect(t) // started: its first tick is armed
	return f
}

// advance moves the clock once the collector has re-armed its tick.
func (f *fixture) advance(t *testing.T, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return f.clock.Pending() == 1 }, within, time.Millisecond)
	f.clock.Advance(d)
}

func (f *fixture) expectCollection(t *testing.T) {
	t.Helper()
	select {
	case <-f.engine.listed:
	case <-time.After(within):
		t.Fatal("no collection")
	}
}

func (f *fixture) expectNoCollection(t *testing.T) {
	t.Helper()
	select {
	case <-f.engine.listed:
		t.Fatal("an unexpected collection")
	case <-time.After(50 * time.Millisecond):
	}
}

func (f *fixture) inspect(t *testing.T) messages.InspectReply {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.pid, messages.Inspect{}, within).Result()
	require.NoError(t, err)
	return res.(messages.InspectReply)
}

func TestCollectsOnItsTimer(t *testing.T) {
	f := start(t, nil, nil)
	f.advance(t, 59*time.Minute)
	f.expectNoCollection(t)
	f.advance(t, time.Minute)
	f.expectCollection(t)
	require.Eventually(t, func() bool { return f.inspect(t).Facts["runs"] == "1" }, within, time.Millisecond)
	facts := f.inspect(t).Facts
	assert.Equal(t, "timer", facts["lastReason"])
	assert.Equal(t, "1", facts["lastRemoved"])
	assert.Equal(t, []string{"forge/agent:old"}, f.engine.removals())
	assert.Equal(t, []string{"timer 1 <nil>"}, f.told(), "the collection's report reaches OnCollection")
}

func TestCollectsWhenTheDiskTurnsLow(t *testing.T) {
	var low atomic.Bool
	f := start(t, nil, func(context.Context) (bool, error) { return low.Load(), nil })
	f.advance(t, time.Minute)
	f.expectNoCollection(t)
	low.Store(true)
	f.advance(t, time.Minute)
	f.expectCollection(t)
	require.Eventually(t, func() bool { return f.inspect(t).Facts["runs"] == "1" }, within, time.Millisecond)
	assert.Equal(t, "disk_low", f.inspect(t).Facts["lastReason"])
	f.advance(t, time.Minute) // still low: no new trigger
	f.expectNoCollection(t)
}

// Without an interval (the daemon's default) nothing is scheduled: the
// collector still runs when the disk turns low.
func TestWithoutAnIntervalOnlyDiskPressureCollects(t *testing.T) {
	var low atomic.Bool
	f := startEvery(t, 0, nil, func(context.Context) (bool, error) { return low.Load(), nil })
	assert.Contains(t, f.inspect(t).Facts["nextScheduled"], "never")
	for range 3 {
		f.advance(t, time.Hour)
		f.expectNoCollection(t)
	}
	low.Store(true)
	f.advance(t, time.Minute)
	f.expectCollection(t)
	require.Eventually(t, func() bool { return f.inspect(t).Facts["runs"] == "1" }, within, time.Millisecond)
	assert.Equal(t, "disk_low", f.inspect(t).Facts["lastReason"])
}

func TestCollectNowAndTheReferenceCount(t *testing.T) {
	refs := imagegc.NewRefs()
	require.NoError(t, refs.Acquire(t.Context(), "attempt", "old"))
	f := start(t, refs, nil)
	res, err := f.system.Root.RequestFuture(f.pid, CollectNow{}, within).Result()
	require.NoError(t, err)
	reply := res.(CollectReply)
	require.NoError(t, reply.Err)
	assert.Empty(t, reply.Report.Removed, "an attempt holds the old key")
	assert.Empty(t, f.engine.removals())

	refs.Release("attempt")
	res, err = f.system.Root.RequestFuture(f.pid, CollectNow{DryRun: true}, within).Result()
	require.NoError(t, err)
	reply = res.(CollectReply)
	require.Len(t, reply.Report.Removed, 1)
	assert.True(t, reply.Report.DryRun)
	assert.Empty(t, f.engine.removals(), "a dry run removes nothing")
}

// While the host refuses maintenance (the engine unreachable, say), the
// collector runs nothing: not on its timer, not under disk pressure, not
// on request; once allowed again it does.
func TestRefusedMaintenanceCollectsNothing(t *testing.T) {
	var low atomic.Bool
	f := start(t, nil, func(context.Context) (bool, error) { return low.Load(), nil })
	f.system.Root.Send(f.pid, messages.MaintenanceVerdict{Code: failure.DockerUnreachable})
	require.Eventually(t, func() bool { return f.inspect(t).Phase == "refused" }, within, time.Millisecond)
	low.Store(true)
	f.advance(t, time.Hour)
	f.expectNoCollection(t)
	res, err := f.system.Root.RequestFuture(f.pid, CollectNow{}, within).Result()
	require.NoError(t, err)
	assert.Equal(t, failure.DockerUnreachable, failure.CodeOf(res.(CollectReply).Err))

	f.system.Root.Send(f.pid, messages.MaintenanceVerdict{Allowed: true})
	f.advance(t, time.Minute)
	f.expectCollection(t)
}
