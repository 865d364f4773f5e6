package supervisor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// fakeCapacity returns whatever report the test sets.
type fakeCapacity struct {
	mu     sync.Mutex
	report preflight.Report
	calls  int
	clock  clock.Clock // stamps the reports; the fixture's
}

func (f *fakeCapacity) set(capacity int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.report = preflight.Report{CheckedAt: time.Now(), Available: code == "" && capacity > 0, Capacity: capacity}
	if code != "" {
		f.report.Code = preflight.DockerDiskLow
		f.report.Reason = code
	}
}

func (f *fakeCapacity) Refresh(context.Context) (preflight.Report, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	r := f.report
	r.CheckedAt = f.clock.Now()
	return r, uint64(f.calls)
}

func (f *fakeCapacity) Last() (preflight.Report, uint64, bool) { return preflight.Report{}, 0, false }

// refreshInterval is the fixture's capacity refresh period, on its manual
// clock.
const refreshInterval = 30 * time.Second

func newCapacityFixture(t *testing.T, source *fakeCapacity, maxSlots int) *fixture {
	t.Helper()
	sys := actortest.NewSystem(t)
	f := &fixture{system: sys, cleaner: &fakeCleaner{}, clock: sys.Clock}
	source.clock = sys.Clock
	f.root = sys.Spawn(Props(Config{
		Slots: maxSlots, QueueLimit: 8, Cleaner: f.cleaner, Ledgers: ledger.Store{Root: t.TempDir()}, Capacity: source,
		RefreshInterval: refreshInterval, CapacityTTL: time.Hour, Clock: f.clock,
		NewAttempt: func(d *messages.Dispatch, subscriber, _ *actor.PID) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: d, subscriber: subscriber} })
		},
	}))
	return f
}

// afterRefresh moves the manual clock one refresh period at a time until
// cond holds: a capacity change is seen at the next refresh, never by
// sleeping.
func (f *fixture) afterRefresh(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		f.clock.Advance(refreshInterval)
		return false
	}, within, 5*time.Millisecond)
}

func TestCapacityShrinksByDrainingNeverByKilling(t *testing.T) {
	source := &fakeCapacity{}
	source.set(3, "")
	f := newCapacityFixture(t, source, 5)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 3 })
	probe := f.system.NewProbe()
	var running []*messages.Dispatch
	for range 3 {
		d := dispatch()
		require.True(t, f.submit(t, d, probe.PID()).Accepted)
		running = append(running, d)
	}
	require.Eventually(t, func() bool { return f.snapshot(t).Active == 3 }, within, 10*time.Millisecond)

	// The host can now hold one attempt: none is stopped, new ones queue.
	source.set(1, "")
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 1 })
	queued := dispatch()
	reply := f.submit(t, queued, probe.PID())
	require.True(t, reply.Accepted)
	assert.True(t, reply.Queued)
	actortest.ExpectNoMessage[messages.AttemptFinished](t, probe, refreshInterval)
	assert.Equal(t, 3, f.snapshot(t).Active, "running attempts are never killed by a smaller capacity")

	// Two finish: still at the new size of one, so the queued one waits.
	for _, d := range running[:2] {
		f.system.Root.Send(f.attemptPID(t, d), finishNow{})
	}
	require.Eventually(t, func() bool { s := f.snapshot(t); return s.Active == 1 && s.Queued == 1 }, within, 10*time.Millisecond)
	// The last one finishes: the queued attempt is admitted.
	f.system.Root.Send(f.attemptPID(t, running[2]), finishNow{})
	require.Eventually(t, func() bool {
		s := f.snapshot(t)
		return s.Queued == 0 && len(s.Attempts) == 1 && s.Attempts[0] == queued.AttemptID()
	}, within, 10*time.Millisecond)
}

func TestAdmissionRefusedWithThePreflightCodeWhileUnavailable(t *testing.T) {
	source := &fakeCapacity{}
	source.set(0, "disk is low")
	f := newCapacityFixture(t, source, 2)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Preflight != nil })
	reply := f.submit(t, dispatch(), nil)
	assert.False(t, reply.Accepted)
	assert.Equal(t, string(preflight.DockerDiskLow), reply.Code)
	assert.Equal(t, "disk is low", reply.Message)

	// Capacity comes back: admission resumes at once.
	source.set(2, "")
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 2 })
	assert.True(t, f.submit(t, dispatch(), nil).Accepted)
}

func TestQueuedAttemptsAreRefusedWhenTheHostBecomesUnavailable(t *testing.T) {
	source := &fakeCapacity{}
	source.set(1, "")
	f := newCapacityFixture(t, source, 1)
	f.afterRefresh(t, func() bool { return f.snapshot(t).Slots == 1 })
	probe := f.system.NewProbe()
	running, queued := dispatch(), dispatch()
	require.True(t, f.submit(t, running, probe.PID()).Accepted)
	require.True(t, f.submit(t, queued, probe.PID()).Queued)

	source.set(0, "disk is low")
	f.clock.Advance(refreshInterval)
	got := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == queued.AttemptID() })
	assert.Equal(t, string(preflight.DockerDiskLow), got.Outcome.Code)
	s := f.snapshot(t)
	assert.Equal(t, []string{running.AttemptID()}, s.Attempts, "the running attempt carries on")
	assert.Zero(t, s.Queued)
}

// The host report's maintenance verdict reaches the image collector (and
// the reaper) when it changes, and only then: refused while the engine is
// unreachable, allowed again once it answers. A capacity-low code allows
// maintenance (collecting images is often its cure).
func TestMaintenanceVerdictFollowsTheHostReport(t *testing.T) {
	sys := actortest.NewSystem(t)
	verdicts := sys.NewProbe()
	recorder := actor.PropsFromFunc(func(ctx actor.Context) {
		if v, ok := ctx.Message().(messages.MaintenanceVerdict); ok {
			ctx.Send(verdicts.PID(), v)
		}
	})
	source := &fakeCapacity{clock: sys.Clock}
	source.mu.Lock()
	source.report = preflight.Report{Code: failure.DockerUnreachable, Reason: "no engine"}
	source.mu.Unlock()
	sys.Spawn(Props(Config{
		Slots: 1, Cleaner: &fakeCleaner{}, Ledgers: ledger.Store{Root: t.TempDir()}, Capacity: source,
		RefreshInterval: refreshInterval, CapacityTTL: time.Hour, Clock: sys.Clock, Collector: recorder,
		NewAttempt: func(*messages.Dispatch, *actor.PID, *actor.PID) *actor.Props { return nil },
	}))
	got := actortest.Expect[messages.MaintenanceVerdict](t, verdicts, within)
	assert.Equal(t, messages.MaintenanceVerdict{Code: failure.DockerUnreachable}, got)

	// The same verdict again is not sent; a capacity-low code allows.
	require.Eventually(t, func() bool { return sys.Clock.Pending() > 0 }, within, time.Millisecond)
	sys.Clock.Advance(refreshInterval)
	actortest.ExpectNoMessage[messages.MaintenanceVerdict](t, verdicts, time.Minute)
	source.set(0, "disk is low")
	require.Eventually(t, func() bool { return sys.Clock.Pending() > 0 }, within, time.Millisecond)
	sys.Clock.Advance(refreshInterval)
	assert.Equal(t, messages.MaintenanceVerdict{Allowed: true}, actortest.Expect[messages.MaintenanceVerdict](t, verdicts, within))
}
