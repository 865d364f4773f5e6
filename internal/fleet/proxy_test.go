package fleet

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/messages"
)

// TestClaimedSilenceBoundsTheWait: a member that claimed its attempt and
// left is waited for claimedWait (10 s) from the moment it is seen gone,
// on a fixed clock; the request made meanwhile never waits past the
// bound; an answer from its address (a member restarted there) starts
// the measure again.
func TestClaimedSilenceBoundsTheWait(t *testing.T) {
	if claimedWait != 10*time.Second {
		t.Fatalf("claimedWait = %s; the documented loss bound is 10 s (docs/fleet.md)", claimedWait)
	}
	full := eventsHold + DefaultRequestTimeout
	t0 := time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC)
	var c claimedSilence
	if got := c.wait(t0, full); got != full {
		t.Fatalf("a heard member's request waits %s; want %s", got, full)
	}
	if c.gone(t0) {
		t.Fatal("lost at the first sight of its absence")
	}
	if got := c.wait(t0.Add(6*time.Second), full); got != 4*time.Second {
		t.Fatalf("6 s into the silence a request may wait %s; want the 4 s left", got)
	}
	if c.gone(t0.Add(claimedWait - time.Millisecond)) {
		t.Fatal("lost before the bound")
	}
	if got := c.wait(t0.Add(claimedWait+time.Second), full); got != time.Millisecond {
		t.Fatalf("past the bound a request may wait %s; want the floor of 1 ms", got)
	}
	// An answer from the address resets it: the bound runs again from the
	// next sight of the absence.
	c.heard()
	t1 := t0.Add(claimedWait - time.Second)
	if c.gone(t1) || c.gone(t1.Add(claimedWait-time.Millisecond)) {
		t.Fatal("an answer did not start the measure again")
	}
	if !c.gone(t1.Add(claimedWait)) {
		t.Fatal("not lost claimedWait after the silence began again")
	}
}

// manualClock is a clock the test moves; it counts its readings, so the
// test knows how far the follower has gone.
type manualClock struct {
	mu    sync.Mutex
	read  *sync.Cond
	at    time.Time
	reads int
}

func newManualClock(at time.Time) *manualClock {
	c := &manualClock{at: at}
	c.read = sync.NewCond(&c.mu)
	return c
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	c.read.Broadcast()
	return c.at
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// awaitReadings returns once the clock has been read n times.
func (c *manualClock) awaitReadings(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.reads < n {
		c.read.Wait()
	}
}

// followGone follows attemptID on a member the topology does not list
// (gone), with a real etcd for the fates and an actor system without
// remote (so every request to the member fails, as to a dead host), on
// clock. It returns the member and the submitter's log.
func followGone(t *testing.T, clock *manualClock, claimedBy string) (*Member, *runner.Log, string) {
	t.Helper()
	etcd := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	m := &Member{cfg: Config{Name: "follow", RequestTimeout: 100 * time.Millisecond}, etcd: cli, system: system,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), now: clock.Now}
	attemptID := ids.NewUUID()
	if claimedBy != "" {
		fate, err := m.settle(context.Background(), attemptID, fateClaimed+claimedBy)
		require.NoError(t, err)
		require.Equal(t, fateClaimed+claimedBy, fate)
	}
	log, ok := runner.NewLogs(0).Open(attemptID)
	require.True(t, ok)
	target := &fleetpb.MemberState{RunnerId: "runner-b", MemberId: "follow@gone", Address: "127.0.0.1:1"}
	m.followers.Add(1)
	go m.follow(log, attemptID, target)
	t.Cleanup(func() {
		m.stopping.Store(true)
		m.followers.Wait()
	})
	return m, log, attemptID
}

// outcomeOf waits for the log's outcome (the follower's end).
func outcomeOf(t *testing.T, log *runner.Log) messages.AttemptOutcome {
	t.Helper()
	for {
		_, out, _, changed := log.Read(0)
		if out != nil {
			return *out
		}
		select {
		case <-changed:
		case <-time.After(time.Minute):
			t.Fatal("the follower did not end the attempt")
		}
	}
}

// TestFollowEndsAClaimedAttemptOfAGoneMemberAtTheBound: the submitter of
// an attempt whose member claimed it and then left the member list keeps
// waiting (three rounds on the manual clock, the attempt unfinished), and
// once the clock passes claimedWait since it saw the member gone, ends it
// with sandbox_runner_lost saying the branch may have moved; the fate in
// etcd stays the member's claim.
func TestFollowEndsAClaimedAttemptOfAGoneMemberAtTheBound(t *testing.T) {
	clock := newManualClock(time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC))
	m, log, attemptID := followGone(t, clock, "runner-b")
	// Each round reads the clock twice (the bound, the request's wait).
	clock.awaitReadings(6)
	if _, out, _, _ := log.Read(0); out != nil {
		t.Fatalf("ended before the bound: %+v", out)
	}
	clock.advance(claimedWait)
	out := outcomeOf(t, log)
	if out.Code != string(failure.SandboxRunnerLost) || out.Status != messages.StatusFailed || !strings.Contains(out.Message, "claimed") ||
		!strings.Contains(out.Message, "may have moved") {
		t.Fatalf("outcome %+v; want %s saying it was claimed and the branch may have moved", out, failure.SandboxRunnerLost)
	}
	fate, err := m.settle(context.Background(), attemptID, fateLost+"runner-b")
	require.NoError(t, err)
	require.Equal(t, fateClaimed+"runner-b", fate, "the claim stays the attempt's fate")
}

// TestFollowDeclaresAnUnclaimedAttemptOfAGoneMemberLost: without a claim,
// the submitter records the loss in etcd and ends the attempt at once,
// whatever the clock says.
func TestFollowDeclaresAnUnclaimedAttemptOfAGoneMemberLost(t *testing.T) {
	clock := newManualClock(time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC))
	m, log, attemptID := followGone(t, clock, "")
	out := outcomeOf(t, log)
	if out.Code != string(failure.SandboxRunnerLost) || strings.Contains(out.Message, "claimed") {
		t.Fatalf("outcome %+v; want %s for an unclaimed attempt", out, failure.SandboxRunnerLost)
	}
	fate, err := m.settle(context.Background(), attemptID, fateClaimed+"runner-b")
	require.NoError(t, err)
	require.Equal(t, fateLost+"runner-b", fate, "the loss is recorded before the attempt ends")
}
