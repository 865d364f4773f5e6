package supervisor

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// downEngine fails every listing while down is set, as an engine that is
// restarting does.
type downEngine struct {
	emptyEngine
	down  atomic.Bool
	lists atomic.Int32
}

func (e *downEngine) ListManaged(ctx context.Context) ([]reaper.Object, error) {
	e.lists.Add(1)
	if e.down.Load() {
		return nil, errors.New("Cannot connect to the Docker daemon")
	}
	return nil, nil
}

// An attempt that ended degraded makes the reaper run a round at once and
// again 1 s, 2 s, 4 s … later while rounds fail (the engine is away), and
// stop retrying once a round succeeds: the leftovers are reaped as soon as
// the engine answers again, not at the next scheduled round (an hour away
// here), and without the host report having noticed the engine was gone.
func TestReaperRetriesSoonWhileAnAttemptsLeftoversRemain(t *testing.T) {
	sys := actortest.NewSystem(t)
	system := sys.ActorSystem
	engine := &downEngine{}
	engine.down.Store(true)
	pid := sys.Spawn(newReaperProps(ReaperConfig{
		Store: ledger.Store{Root: t.TempDir()}, Docker: engine, Interval: time.Hour,
		Round: reaper.Config{RunnerID: "00000000-0000-4000-8000-000000000001", RunnerInstanceID: "00000000-0000-4000-8000-000000000002"},
	}, newLiveSet(), sys.Clock))
	rounds := func() int {
		res, err := system.Root.RequestFuture(pid, messages.Inspect{}, 10*time.Second).Result()
		require.NoError(t, err)
		n, err := strconv.Atoi(res.(messages.InspectReply).Facts["rounds"])
		require.NoError(t, err)
		return n
	}
	require.Eventually(t, func() bool { return sys.Clock.Pending() == 1 }, 10*time.Second, time.Millisecond)

	system.Root.Send(pid, leftovers{})
	require.Eventually(t, func() bool { return rounds() == 1 }, 10*time.Second, time.Millisecond, "a round runs at once")
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		require.Eventually(t, func() bool { return sys.Clock.Pending() == 1 }, 10*time.Second, time.Millisecond)
		sys.Clock.Advance(wait - time.Millisecond)
		assert.Equal(t, i+1, rounds(), "no retry before %s", wait)
		sys.Clock.Advance(time.Millisecond)
		require.Eventually(t, func() bool { return rounds() == i+2 }, 10*time.Second, time.Millisecond, "a retry %s after the failed round", wait)
	}
	engine.down.Store(false) // the engine answers again
	require.Eventually(t, func() bool { return sys.Clock.Pending() == 1 }, 10*time.Second, time.Millisecond)
	sys.Clock.Advance(8 * time.Second)
	require.Eventually(t, func() bool { return rounds() == 5 }, 10*time.Second, time.Millisecond)

	// A clean round ends the retries: the next round is the scheduled one.
	require.Eventually(t, func() bool { return sys.Clock.Pending() == 1 }, 10*time.Second, time.Millisecond)
	sys.Clock.Advance(59 * time.Minute)
	assert.Equal(t, 5, rounds())
	sys.Clock.Advance(time.Minute)
	require.Eventually(t, func() bool { return rounds() == 6 }, 10*time.Second, time.Millisecond)
}
