package worker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func TestAwaitReleaseSeesTheRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "release")
	require.NoError(t, WriteReleaseFile(path))
	require.True(t, awaitRelease(context.Background(), path, time.Hour))
}

func TestAwaitReleaseGivesUpAfterTheWait(t *testing.T) {
	require.False(t, awaitRelease(context.Background(), filepath.Join(t.TempDir(), "release"), time.Millisecond))
}

// A worker told to stop (its context ended by SIGTERM) does not hold the
// container open for a release that will not come.
func TestAwaitReleaseEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- awaitRelease(ctx, filepath.Join(t.TempDir(), "release"), time.Hour) }()
	cancel()
	select {
	case released := <-done:
		require.False(t, released)
	case <-time.After(10 * time.Second):
		t.Fatal("awaitRelease kept waiting after its context ended")
	}

	// awaitHostRelease does not begin a wait once told to stop.
	r := &run{cfg: Config{ReleasePath: filepath.Join(t.TempDir(), "release")}, pkt: &messages.StartPacket{ReleaseWaitMillis: 3_600_000}}
	start := time.Now()
	r.awaitHostRelease(ctx)
	require.Less(t, time.Since(start), 10*time.Second)
}
