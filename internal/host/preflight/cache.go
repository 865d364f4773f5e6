package preflight

import (
	"context"
	"sync"
	"time"

	"github.com/forgedev/forged/internal/kit/clock"
)

// Prober produces a Report; *Checker is one.
type Prober interface {
	Check(ctx context.Context) Report
}

// DefaultTTL is how long a cached Report stays current.
const DefaultTTL = 30 * time.Second

// Cache keeps the latest Report for a TTL. Every refresh increments the
// generation, which is also stored in Report.Generation. It is safe for
// concurrent use; concurrent callers of a stale cache share one check.
type Cache struct {
	prober Prober
	ttl    time.Duration
	now    func() time.Time

	refreshing sync.Mutex // held while a check runs

	mu     sync.Mutex
	report Report
	gen    uint64
	at     time.Time
}

// NewCache caches prober's reports for ttl (≤ 0: DefaultTTL), aged on the
// wall clock.
func NewCache(prober Prober, ttl time.Duration) *Cache {
	return NewCacheWithClock(prober, ttl, clock.System{})
}

// NewCacheWithClock is NewCache with reports aged on clk (a test's manual
// clock: a report goes stale when the test advances it past the TTL).
func NewCacheWithClock(prober Prober, ttl time.Duration, clk clock.Clock) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if clk == nil {
		clk = clock.System{}
	}
	return &Cache{prober: prober, ttl: ttl, now: clk.Now}
}

// Current returns the cached Report and its generation, checking again
// first when there is none or it is older than the TTL.
func (c *Cache) Current(ctx context.Context) (Report, uint64) {
	if r, gen, ok := c.fresh(); ok {
		return r, gen
	}
	c.refreshing.Lock()
	defer c.refreshing.Unlock()
	if r, gen, ok := c.fresh(); ok { // another caller refreshed meanwhile
		return r, gen
	}
	return c.refreshLocked(ctx)
}

// Refresh checks now, whatever the age of the cached Report, and returns
// the new Report and generation. A supervisor calls it on its timer.
func (c *Cache) Refresh(ctx context.Context) (Report, uint64) {
	c.refreshing.Lock()
	defer c.refreshing.Unlock()
	return c.refreshLocked(ctx)
}

// Last returns the cached Report and generation without checking; ok is
// false before the first refresh. Snapshots use it.
func (c *Cache) Last() (r Report, generation uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.report, c.gen, c.gen > 0
}

func (c *Cache) fresh() (Report, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == 0 || c.now().Sub(c.at) >= c.ttl {
		return Report{}, 0, false
	}
	return c.report, c.gen, true
}

// refreshLocked runs one check; c.refreshing is held. A check cut short by
// the caller's own cancellation says nothing about the host: it is not
// cached, and the previous Report (if any) is returned instead.
func (c *Cache) refreshLocked(ctx context.Context) (Report, uint64) {
	r := c.prober.Check(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		if c.gen > 0 {
			return c.report, c.gen
		}
		return r, 0
	}
	c.gen++
	r.Generation = c.gen
	c.report, c.at = r, c.now()
	return r, c.gen
}
