package preflight

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/kit/clock"
)

// countingProber returns reports numbered by its calls; slow makes each
// check take a while so that concurrent callers overlap.
type countingProber struct {
	calls atomic.Int32
	slow  time.Duration
}

func (p *countingProber) Check(ctx context.Context) Report {
	n := p.calls.Add(1)
	select {
	case <-time.After(p.slow):
	case <-ctx.Done():
		return Report{Code: DockerUnreachable, Reason: ctx.Err().Error()}
	}
	return Report{Available: true, Capacity: int(n)}
}

func TestCacheTTLAndGeneration(t *testing.T) {
	p := &countingProber{}
	clk := clock.NewManual(time.Unix(1000, 0))
	c := NewCacheWithClock(p, 0, clk)
	assert.Equal(t, DefaultTTL, c.ttl)

	_, _, ok := c.Last()
	assert.False(t, ok)
	r, gen := c.Current(context.Background())
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, uint64(1), r.Generation)
	assert.Equal(t, 1, r.Slots())

	clk.Advance(29 * time.Second)
	r, gen = c.Current(context.Background())
	assert.Equal(t, uint64(1), gen, "fresh within the TTL")
	assert.Equal(t, int32(1), p.calls.Load())

	clk.Advance(time.Second)
	r, gen = c.Current(context.Background())
	assert.Equal(t, uint64(2), gen, "stale at the TTL")
	assert.Equal(t, 2, r.Slots())

	r, gen = c.Refresh(context.Background())
	assert.Equal(t, uint64(3), gen, "forced")
	last, lastGen, ok := c.Last()
	assert.True(t, ok)
	assert.Equal(t, gen, lastGen)
	assert.Equal(t, r, last)
}

func TestCacheConcurrentCallersShareOneCheck(t *testing.T) {
	p := &countingProber{slow: 50 * time.Millisecond}
	c := NewCache(p, time.Minute)
	var wg sync.WaitGroup
	gens := make([]uint64, 16)
	for i := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, gens[i] = c.Current(context.Background())
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), p.calls.Load())
	for _, g := range gens {
		assert.Equal(t, uint64(1), g)
	}
}

func TestCacheIgnoresCancelledChecks(t *testing.T) {
	p := &countingProber{slow: time.Hour}
	c := NewCache(p, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, gen := c.Current(ctx)
	assert.Zero(t, gen, "nothing cached")
	assert.Equal(t, DockerUnreachable, r.Code)
	_, _, ok := c.Last()
	assert.False(t, ok)

	p.slow = 0
	r, gen = c.Refresh(context.Background())
	require.Equal(t, uint64(1), gen)
	p.slow = time.Hour
	r2, gen2 := c.Refresh(ctx)
	assert.Equal(t, uint64(1), gen2, "a cancelled refresh keeps the previous report")
	assert.Equal(t, r, r2)
}

func TestCacheWithChecker(t *testing.T) {
	h := bigHost()
	c := NewCache(NewChecker(rootlessEngine(), h, Options{StateRoot: "/state"}), time.Minute)
	r, gen := c.Current(context.Background())
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, 3, r.Slots())
	h.mu.Lock()
	h.memory = 4 << 30
	h.mu.Unlock()
	r, gen = c.Refresh(context.Background())
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, 0, r.Slots())
	assert.Equal(t, DockerMemoryLow, r.Code)
}
