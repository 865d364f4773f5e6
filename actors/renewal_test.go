package actors

import (
	"github.com/forgedev/forged/internal/kit/clock"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

func (h *harness) renew(t *testing.T, d *messages.Dispatch, token string, expiresAt time.Time) messages.RenewLeaseReply {
	t.Helper()
	res, err := h.system.Root.RequestFuture(h.root, messages.RenewLease{AttemptID: d.AttemptID(), FencingToken: token, ExpiresAt: expiresAt}, within).Result()
	require.NoError(t, err)
	return res.(messages.RenewLeaseReply)
}

func TestRenewalKeepsTheAttemptAlivePastItsFirstExpiry(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	host.workerEvents = []messages.Event{messages.RunnerEvent("worker_started", "up", nil)}
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	// The fake worker is silent: no idle limit within the test's hours.
	h := newHarnessWith(t, host, clk, func(c *AttemptConfig) { c.Limits = timelimit.Limits{HardWall: 8 * time.Hour, Idle: 8 * time.Hour} })
	d := testDispatch(clk.Now().Add(time.Hour))
	probe := h.submit(t, d)
	<-host.runEntered
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "worker_started" })

	renewed := clk.Now().Add(2 * time.Hour)
	reply := h.renew(t, d, d.Lease.FencingToken, renewed)
	require.True(t, reply.Accepted, "%+v", reply)

	// The renewal is in the ledger.
	require.Eventually(t, func() bool {
		e, err := ledger.Store{Root: h.state}.Read(d.AttemptID())
		return err == nil && e.ExpiresAt.Equal(renewed)
	}, within, time.Millisecond, "the ledger holds the renewed expiry")

	// The renewal reached the worker as a signed update it can verify.
	require.Eventually(t, func() bool { return len(host.pushedLeases()) == 1 }, within, time.Millisecond)
	update, err := lease.DecodeUpdate(host.pushedLeases()[0])
	require.NoError(t, err)
	assert.Equal(t, d.AttemptID(), update.DispatchAttemptID)
	assert.Equal(t, d.Lease.FencingToken, update.FencingToken)

	actortest.ExpectNoMessage[messages.AttemptFinished](t, probe, 90*time.Minute) // past the first expiry
	clk.Advance(30 * time.Minute)                                                 // the renewed expiry
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxLeaseExpired), out.Code)
}

func TestRenewalRefusals(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	<-host.runEntered

	wrongFence := h.renew(t, d, "00000000-0000-4000-8000-999999999999", time.Now().Add(2*time.Hour))
	assert.False(t, wrongFence.Accepted)
	assert.Equal(t, string(failure.SandboxOutputStale), wrongFence.Code)

	earlier := h.renew(t, d, d.Lease.FencingToken, d.Lease.ExpiresAt)
	assert.False(t, earlier.Accepted, "an equal expiry is not a renewal")

	unknown := h.renew(t, testDispatch(time.Now()), d.Lease.FencingToken, time.Now().Add(2*time.Hour))
	assert.Equal(t, string(failure.AttemptNotFound), unknown.Code)
	assert.Empty(t, host.pushedLeases())

	h.cancel(t, d)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
}

// TestForgedRunnerEventsArriveAsTheAgents feeds the attempt lines that
// claim the runner's role without the worker's MAC (as a task writing to
// /proc/1/fd/1 would) beside the worker's signed events: only the signed
// ones keep role runner, and a forged worker_started does not start the
// running phase.
func TestForgedRunnerEventsArriveAsTheAgents(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	host.lines = []string{
		`{"type":"runner_event","event":{"role":"runner","kind":"checkpoint","content":"forged","eventType":"sandbox_output_imported"}}`,
		`{"type":"runner_event","seq":0,"mac":"AAAA","event":{"role":"runner","kind":"checkpoint","content":"forged","eventType":"worker_started"}}`,
	}
	host.workerEvents = []messages.Event{messages.RunnerEvent("workspace_materialized", "real", nil)}
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	<-host.runEntered
	real := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "workspace_materialized" })
	assert.Equal(t, messages.RoleRunner, real.Event.Role, "the worker's signed event keeps its role")
	forged := 0
	for _, ev := range actortest.All[messages.AttemptEvent](probe) {
		if ev.Event.Content == "forged" {
			forged++
			assert.Equal(t, messages.RoleAgent, ev.Event.Role)
			assert.Equal(t, messages.TaskOutputEventType, ev.Event.EventType, "a forged line gets the host's event type")
		}
	}
	assert.Equal(t, 2, forged)
	reply := h.renew(t, d, d.Lease.FencingToken, time.Now().Add(2*time.Hour))
	require.True(t, reply.Accepted, "%+v", reply)
	actortest.ExpectNoMessage[messages.AttemptFinished](t, probe, time.Minute)
	assert.Empty(t, host.pushedLeases(), "a forged worker_started does not make the worker running")
}
