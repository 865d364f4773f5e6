package worker

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func TestAwaitReleaseSeesTheRelease(t *testing.T) {
	released := make(chan os.Signal, 1)
	released <- syscall.SIGUSR1
	require.True(t, awaitRelease(context.Background(), released, time.Hour))
}

func TestAwaitReleaseGivesUpAfterTheWait(t *testing.T) {
	require.False(t, awaitRelease(context.Background(), make(chan os.Signal, 1), time.Millisecond))
	require.False(t, awaitRelease(context.Background(), nil, time.Millisecond), "no channel: no release can come")
}

func TestClearReleaseDiscardsWhatCameBefore(t *testing.T) {
	released := make(chan os.Signal, 2)
	released <- syscall.SIGUSR1
	released <- syscall.SIGUSR1
	clearRelease(released)
	require.Empty(t, released)
	clearRelease(nil) // a worker without a release channel
}

// A worker told to stop (its context ended by SIGTERM) does not hold the
// container open for a release that will not come.
func TestAwaitReleaseEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- awaitRelease(ctx, make(chan os.Signal, 1), time.Hour) }()
	cancel()
	select {
	case released := <-done:
		require.False(t, released)
	case <-time.After(10 * time.Second):
		t.Fatal("awaitRelease kept waiting after its context ended")
	}

	// awaitHostRelease does not begin a wait once told to stop.
	r := &run{cfg: Config{Released: make(chan os.Signal, 1)}, pkt: &messages.StartPacket{ReleaseWaitMillis: 3_600_000}}
	start := time.Now()
	r.awaitHostRelease(ctx)
	require.Less(t, time.Since(start), 10*time.Second)
}
