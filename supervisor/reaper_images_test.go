package supervisor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

type emptyEngine struct{}

func (emptyEngine) Teardown(context.Context, dockerops.Ownership, string) (messages.CleanupReport, error) {
	return messages.CleanupReport{}, nil
}
func (emptyEngine) ListManaged(context.Context) ([]reaper.Object, error) { return nil, nil }
func (emptyEngine) RemoveManaged(context.Context, reaper.Object) error   { return nil }

// recordingSweeper records which attempts the sweep was told are live.
type recordingSweeper struct {
	mu    sync.Mutex
	calls int
	live  map[string]bool
}

func (s *recordingSweeper) Sweep(_ context.Context, live func(string) bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.live = map[string]bool{}
	for _, hex := range []string{"0123456789abcdef0123456789abcdef", "ffffffffffffffffffffffffffffffff"} {
		s.live[hex] = live(hex)
	}
	return nil, nil
}

// TestReaperRoundSweepsImagesOfAttemptsNotLive: after each round (not a
// dry run) the images of attempts that are not live are released; a live
// attempt's are kept.
func TestReaperRoundSweepsImagesOfAttemptsNotLive(t *testing.T) {
	sys := actortest.NewSystem(t)
	system := sys.ActorSystem
	live := newLiveSet()
	live.add("01234567-89ab-cdef-0123-456789abcdef")
	sweeper := &recordingSweeper{}
	pid := sys.Spawn(newReaperProps(ReaperConfig{
		Store: ledger.Store{Root: t.TempDir()}, Docker: emptyEngine{}, Interval: time.Hour, Images: sweeper,
		Round: reaper.Config{RunnerID: "00000000-0000-4000-8000-000000000001", RunnerInstanceID: "00000000-0000-4000-8000-000000000002"},
	}, live, sys.Clock))

	res, err := system.Root.RequestFuture(pid, ReapNow{DryRun: true}, 10*time.Second).Result()
	require.NoError(t, err)
	require.NoError(t, res.(ReapResult).Err)
	sweeper.mu.Lock()
	assert.Zero(t, sweeper.calls, "a dry run releases nothing")
	sweeper.mu.Unlock()

	res, err = system.Root.RequestFuture(pid, ReapNow{}, 10*time.Second).Result()
	require.NoError(t, err)
	require.NoError(t, res.(ReapResult).Err)
	sweeper.mu.Lock()
	defer sweeper.mu.Unlock()
	assert.Equal(t, 1, sweeper.calls)
	assert.Equal(t, map[string]bool{"0123456789abcdef0123456789abcdef": true, "ffffffffffffffffffffffffffffffff": false}, sweeper.live)
}

// While the host refuses maintenance, the reaper runs no round, scheduled
// or requested; once allowed again it does.
func TestReaperRunsNoRoundWhileMaintenanceIsRefused(t *testing.T) {
	sys := actortest.NewSystem(t)
	system := sys.ActorSystem
	sweeper := &recordingSweeper{}
	pid := sys.Spawn(newReaperProps(ReaperConfig{
		Store: ledger.Store{Root: t.TempDir()}, Docker: emptyEngine{}, Interval: time.Minute, Images: sweeper,
		Round: reaper.Config{RunnerID: "00000000-0000-4000-8000-000000000001", RunnerInstanceID: "00000000-0000-4000-8000-000000000002"},
	}, newLiveSet(), sys.Clock))
	system.Root.Send(pid, messages.MaintenanceVerdict{Code: failure.DockerUnreachable})

	res, err := system.Root.RequestFuture(pid, ReapNow{}, 10*time.Second).Result()
	require.NoError(t, err)
	assert.Equal(t, failure.DockerUnreachable, failure.CodeOf(res.(ReapResult).Err))
	inspect := func() messages.InspectReply {
		res, err := system.Root.RequestFuture(pid, messages.Inspect{}, 10*time.Second).Result()
		require.NoError(t, err)
		return res.(messages.InspectReply)
	}
	require.Eventually(t, func() bool { return sys.Clock.Pending() == 1 }, 10*time.Second, time.Millisecond)
	sys.Clock.Advance(time.Minute) // the scheduled round is skipped
	require.Eventually(t, func() bool { return inspect().Facts["skippedRounds"] == "1" }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "refused", inspect().Phase)
	assert.Equal(t, "0", inspect().Facts["rounds"])

	system.Root.Send(pid, messages.MaintenanceVerdict{Allowed: true})
	res, err = system.Root.RequestFuture(pid, ReapNow{}, 10*time.Second).Result()
	require.NoError(t, err)
	require.NoError(t, res.(ReapResult).Err)
	sweeper.mu.Lock()
	defer sweeper.mu.Unlock()
	assert.Equal(t, 1, sweeper.calls, "the round ran once allowed")
}
