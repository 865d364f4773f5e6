package actors

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/sandbox/lease"
)

// gatedLeases is a LeaseDocker whose first push blocks until released.
type gatedLeases struct {
	mu      sync.Mutex
	pushed  []string // expiries, in push order
	entered chan struct{}
	release chan struct{}
	err     error
}

func (g *gatedLeases) WriteLeaseUpdate(ctx context.Context, _ string, raw []byte) error {
	var u lease.Update
	if err := json.Unmarshal(raw, &u); err != nil {
		return err
	}
	g.mu.Lock()
	first := len(g.pushed) == 0
	g.pushed = append(g.pushed, u.ExpiresAt)
	g.mu.Unlock()
	if first {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return g.err
}

func (g *gatedLeases) expiries() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.pushed...)
}

func signed(t *testing.T, at time.Time) lease.Update {
	t.Helper()
	key, err := lease.NewControlKey()
	require.NoError(t, err)
	u, err := lease.Sign("00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", at, key)
	require.NoError(t, err)
	return u
}

// One push at a time; of the updates that arrive meanwhile only the newest
// is sent, so an older update never overwrites a newer one in the worker.
func TestLeasePusherSendsTheNewestWaitingUpdateAfterThePushInFlight(t *testing.T) {
	system := actortest.NewSystem(t)
	docker := &gatedLeases{entered: make(chan struct{}, 1), release: make(chan struct{})}
	probe := system.NewProbe()
	var pusher *actor.PID
	ready := make(chan struct{})
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			pusher = ctx.Spawn(newLeasePusherProps(docker))
			close(ready)
		case leasePushFailed:
			ctx.Send(probe.PID(), msg)
		}
	}))
	<-ready
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	updates := []lease.Update{signed(t, base.Add(time.Hour)), signed(t, base.Add(2*time.Hour)), signed(t, base.Add(3*time.Hour))}
	system.Root.Send(pusher, pushLease{containerID: "c", update: updates[0]})
	<-docker.entered
	system.Root.Send(pusher, pushLease{containerID: "c", update: updates[1]})
	system.Root.Send(pusher, pushLease{containerID: "c", update: updates[2]})
	close(docker.release)
	require.Eventually(t, func() bool { return len(docker.expiries()) == 2 }, within, 5*time.Millisecond)
	actortest.ExpectNoMessage[leasePushFailed](t, probe, time.Minute)
	assert.Equal(t, []string{updates[0].ExpiresAt, updates[2].ExpiresAt}, docker.expiries(), "the middle update is superseded")
}

func TestLeasePusherReportsAFailedPush(t *testing.T) {
	system := actortest.NewSystem(t)
	docker := &gatedLeases{entered: make(chan struct{}, 1), release: make(chan struct{}), err: errors.New("exec refused")}
	close(docker.release)
	probe := system.NewProbe()
	update := signed(t, time.Now().Add(time.Hour))
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			pusher := ctx.Spawn(newLeasePusherProps(docker))
			ctx.Send(pusher, pushLease{containerID: "c", update: update})
		case leasePushFailed:
			ctx.Send(probe.PID(), msg)
		}
	}))
	got := actortest.Expect[leasePushFailed](t, probe, within)
	assert.ErrorContains(t, got.err, "exec refused")
}
