package dockerops

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest/fakeengine"
)

// The live-restore answer is the engine's, reused for liveRestoreTTL by
// the client and the clients derived from it; an error is never kept, and
// an aged answer is asked again (and so sees a changed setting).
func TestLiveRestoreAnswerIsReusedForItsTTL(t *testing.T) {
	engine := fakeengine.New(t)
	engine.SetInfo(func(i *system.Info) { i.LiveRestoreEnabled = true })
	opts := fastOptions()
	opts.Host = engine.Host()
	c, err := Connect(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	base := engine.CallCount(fakeengine.OpInfo)

	engine.Inject(fakeengine.OpInfo, fakeengine.Fault{Status: http.StatusBadRequest, Times: 1})
	_, err = c.LiveRestore(ctx)
	require.Error(t, err)

	on, err := c.LiveRestore(ctx)
	require.NoError(t, err)
	assert.True(t, on)
	derived := c.WithVolumeImages(nil)
	on, err = derived.LiveRestore(ctx)
	require.NoError(t, err)
	assert.True(t, on)
	assert.Equal(t, base+2, engine.CallCount(fakeengine.OpInfo), "the failed call, then one answer for both clients")

	engine.SetInfo(func(i *system.Info) { i.LiveRestoreEnabled = false })
	on, err = c.LiveRestore(ctx)
	require.NoError(t, err)
	assert.True(t, on, "within the TTL the answer stands")
	c.live.mu.Lock()
	c.live.at = c.live.at.Add(-liveRestoreTTL)
	c.live.mu.Unlock()
	on, err = c.LiveRestore(ctx)
	require.NoError(t, err)
	assert.False(t, on, "an aged answer is asked again")
	assert.Equal(t, base+3, engine.CallCount(fakeengine.OpInfo))

	_, ok := c.live.get(time.Now().Add(-time.Minute))
	assert.False(t, ok, "a clock that went back does not trust the answer")
}
