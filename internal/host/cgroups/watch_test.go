package cgroups

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WatchEvents reports pids.events' max count when above zero, then each
// growth, once, and
// returns when the cgroup goes or its context ends; a cgroup without a
// pids controller is refused.
func TestWatchEventsReportsGrowthUntilTheCgroupGoes(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "pids.events")
	require.NoError(t, os.WriteFile(events, []byte("max 2\n"), 0o644))
	c := &Container{Cgroup: Cgroup{Version: V1, Pids: dir}}

	var mu sync.Mutex
	var seen []uint64
	done := make(chan error, 1)
	go func() {
		done <- c.WatchEvents(context.Background(), func(n uint64) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, n)
		})
	}()
	got := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), seen...)
	}
	require.Eventually(t, func() bool { return len(got()) == 1 }, 10*time.Second, time.Millisecond, "the first reading's count")
	// Replaced whole, as the kernel's file is never seen half-written.
	tmp := filepath.Join(t.TempDir(), "pids.events")
	require.NoError(t, os.WriteFile(tmp, []byte("max 7\n"), 0o644))
	require.NoError(t, os.Rename(tmp, events))
	require.Eventually(t, func() bool { return len(got()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []uint64{2, 7}, got())
	require.NoError(t, os.Remove(events))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its cgroup")
	}
	assert.Equal(t, []uint64{2, 7}, got())

	require.NoError(t, os.WriteFile(events, []byte("max 0\n"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.WatchEvents(ctx, func(uint64) {}) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its context")
	}

	require.Error(t, (&Container{Cgroup: Cgroup{Version: V1}}).WatchEvents(context.Background(), func(uint64) {}))
}
