package supervisor

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/kit/clock"
)

// CapacitySource is where the supervisor learns how many attempts the host
// admits: the preflight cache. Refresh may block (it asks the engine), so
// the supervisor only calls it off its mailbox.
type CapacitySource interface {
	Refresh(ctx context.Context) (preflight.Report, uint64)
	// Last returns the cached report without checking.
	Last() (preflight.Report, uint64, bool)
}

// refreshTimeout bounds one preflight refresh.
const refreshTimeout = time.Minute

type capacityRefreshed struct {
	report preflight.Report
}

type refreshTick struct{}

// capacity is the supervisor's view of the host's capacity.
type capacity struct {
	clock      clock.Clock
	source     CapacitySource
	interval   time.Duration
	ttl        time.Duration
	report     *preflight.Report
	refreshing bool
	timer      clock.Timer
}

// stale reports whether the report is missing or older than the TTL.
func (c *capacity) stale(now time.Time) bool {
	return c.report == nil || now.Sub(c.report.CheckedAt) > c.ttl
}

// refresh starts a preflight check off the mailbox unless one runs.
func (c *capacity) refresh(ctx actor.Context, runCtx context.Context) {
	if c.source == nil || c.refreshing {
		return
	}
	c.refreshing = true
	source := c.source
	actorkit.Go(ctx, runCtx, "preflight refresh", func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, refreshTimeout)
		defer cancel()
		report, _ := source.Refresh(callCtx)
		return capacityRefreshed{report: report}
	})
}

// start takes the source's cached report when it has one, and refreshes
// otherwise.
func (c *capacity) start(ctx actor.Context, runCtx context.Context) {
	if c.source == nil {
		return
	}
	if report, _, ok := c.source.Last(); ok {
		c.record(ctx, report)
		return
	}
	c.refresh(ctx, runCtx)
}

// record keeps a new report and arms the next periodic refresh.
func (c *capacity) record(ctx actor.Context, report preflight.Report) {
	c.refreshing = false
	c.report = &report
	c.arm(ctx)
}

func (c *capacity) arm(ctx actor.Context) {
	c.stop()
	system, self := ctx.ActorSystem(), ctx.Self()
	c.timer = c.clock.AfterFunc(c.interval, func() { system.Root.Send(self, refreshTick{}) })
}

func (c *capacity) stop() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// slots is how many attempts may run now: the configured maximum, bounded
// by the preflight capacity when there is a source (0 until its first
// report). A smaller number never stops running attempts: admission waits
// until enough of them finish.
func (r *root) slots() int {
	if r.capacity.source == nil {
		return r.cfg.Slots
	}
	if r.capacity.report == nil {
		return 0
	}
	return min(r.cfg.Slots, r.capacity.report.Slots())
}
