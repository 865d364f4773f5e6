package supervisor

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

const within = 5 * time.Second

// fakeAttempt reports itself running and then waits to be told how to end.
type fakeAttempt struct {
	d          *messages.Dispatch
	subscriber *actor.PID
}

type finishNow struct{}
type crashNow struct{}

func (f *fakeAttempt) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.Send(ctx.Parent(), messages.AttemptPhaseChanged{AttemptID: f.d.AttemptID(), Phase: messages.PhaseRunning})
	case finishNow:
		f.finish(ctx, messages.StatusSucceeded)
	case messages.CancelAttempt:
		f.finish(ctx, messages.StatusCancelled)
	case crashNow:
		panic(fmt.Sprintf("attempt %s crashed on purpose", msg))
	}
}

func (f *fakeAttempt) finish(ctx actor.Context, status string) {
	out := messages.AttemptFinished{Outcome: messages.AttemptOutcome{AttemptID: f.d.AttemptID(), Status: status}}
	ctx.Send(f.subscriber, out)
	ctx.Send(ctx.Parent(), out)
	ctx.Stop(ctx.Self())
}

type fakeCleaner struct {
	mu     sync.Mutex
	owners []dockerops.Ownership
	err    error // returned by every teardown, with one remaining object
}

func (c *fakeCleaner) Teardown(_ context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owners = append(c.owners, owner)
	report := dockerops.CleanupReport{ReportID: ids.NewUUID(), Source: source, Actions: []dockerops.CleanupAction{{
		DispatchAttemptID: owner.AttemptID, FencingToken: owner.FencingToken, RunnerInstanceID: owner.RunnerInstanceID,
		ResourceType: dockerops.ResourceNetwork, ResourceID: "net", Outcome: dockerops.OutcomeRemoved, OccurredAt: time.Now().UTC(),
	}}}
	if c.err != nil {
		report.Remaining = 1
	}
	return report, c.err
}

func (c *fakeCleaner) calls() []dockerops.Ownership {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]dockerops.Ownership(nil), c.owners...)
}

type fixture struct {
	system  *actortest.System
	root    *actor.PID
	cleaner *fakeCleaner
	ledgers ledger.Store
	clock   *clock.Manual // the capacity fixture's clock
}

func newFixture(t *testing.T, slots, queue int) *fixture {
	t.Helper()
	return newFixtureWithPermits(t, slots, queue, 0)
}

func newFixtureWithPermits(t *testing.T, slots, queue, permits int) *fixture {
	t.Helper()
	f := &fixture{system: actortest.NewSystem(t), cleaner: &fakeCleaner{}, ledgers: ledger.Store{Root: t.TempDir()}}
	f.root = f.system.Spawn(Props(Config{
		Slots: slots, QueueLimit: queue, Cleaner: f.cleaner, Ledgers: f.ledgers, BuildPermits: permits,
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, _ *actor.PID) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: d, subscriber: subscriber} })
		},
	}))
	return f
}

// dispatch is a fresh dispatch whose lease runs an hour from now.
func dispatch() *messages.Dispatch { return actortest.NewDispatch(time.Now().Add(time.Hour)) }

func (f *fixture) submit(t *testing.T, d *messages.Dispatch, subscriber *actor.PID) messages.SubmitReply {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.root, messages.SubmitAttempt{Dispatch: d, Subscriber: subscriber}, within).Result()
	require.NoError(t, err)
	return res.(messages.SubmitReply)
}

func (f *fixture) snapshot(t *testing.T) messages.Snapshot {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.root, messages.SnapshotRequest{}, within).Result()
	require.NoError(t, err)
	return res.(messages.Snapshot)
}

func (f *fixture) inspect(t *testing.T) messages.InspectReply {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.root, messages.Inspect{}, within).Result()
	require.NoError(t, err)
	return res.(messages.InspectReply)
}

// attemptPID finds the attempt actor the supervisor spawned for d.
func (f *fixture) attemptPID(t *testing.T, d *messages.Dispatch) *actor.PID {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.root, messages.Inspect{}, within).Result()
	require.NoError(t, err)
	for _, child := range res.(messages.InspectReply).Children {
		pid := actor.NewPID(f.system.Address(), child)
		if child == f.root.GetId()+"/attempt-"+hex(d.AttemptID()) {
			return pid
		}
	}
	t.Fatalf("no attempt actor for %s", d.AttemptID())
	return nil
}

func hex(id string) string {
	out := make([]byte, 0, 32)
	for i := 0; i < len(id); i++ {
		if id[i] != '-' {
			out = append(out, id[i])
		}
	}
	return string(out)
}

func TestAdmissionQueueAndRefusal(t *testing.T) {
	f := newFixture(t, 1, 1)
	probe := f.system.NewProbe()
	a, b, c := dispatch(), dispatch(), dispatch()

	assert.Equal(t, messages.SubmitReply{AttemptID: a.AttemptID(), Accepted: true}, f.submit(t, a, probe.PID()))
	assert.Equal(t, messages.SubmitReply{AttemptID: b.AttemptID(), Accepted: true, Queued: true}, f.submit(t, b, probe.PID()))
	refused := f.submit(t, c, probe.PID())
	assert.False(t, refused.Accepted)
	assert.Equal(t, "capacity_exhausted", refused.Code)
	dup := f.submit(t, a, probe.PID())
	assert.Equal(t, "attempt_duplicate", dup.Code)

	require.Eventually(t, func() bool { s := f.snapshot(t); return s.Active == 1 && s.Queued == 1 }, within, 10*time.Millisecond)

	// Finishing the running attempt admits the queued one, FIFO.
	f.system.Root.Send(f.attemptPID(t, a), finishNow{})
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == a.AttemptID() })
	require.Eventually(t, func() bool {
		s := f.snapshot(t)
		return s.Queued == 0 && s.Active == 1 && len(s.Attempts) == 1 && s.Attempts[0] == b.AttemptID()
	}, within, 10*time.Millisecond)
}

// A dispatch for another runner is refused without naming this runner's
// id: the refusal goes back to whoever submitted, and the id is what a
// forged dispatch for this runner would need.
func TestWrongRunnerRefusalNamesNoRunnerID(t *testing.T) {
	const ours = "00000000-0000-4000-8000-00000000a11d"
	system := actortest.NewSystem(t)
	root := system.Spawn(Props(Config{Slots: 1, QueueLimit: 1, RunnerID: ours,
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, _ *actor.PID) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: d, subscriber: subscriber} })
		},
	}))
	d := dispatch()
	require.NotEqual(t, ours, d.Execution.RunnerID)
	res, err := system.Root.RequestFuture(root, messages.SubmitAttempt{Dispatch: d, Subscriber: system.NewProbe().PID()}, within).Result()
	require.NoError(t, err)
	reply := res.(messages.SubmitReply)
	assert.False(t, reply.Accepted)
	assert.Equal(t, string(failure.DispatchWrongRunner), reply.Code)
	assert.NotContains(t, reply.Message, ours)
	assert.NotContains(t, reply.Message, d.Execution.RunnerID)
	assert.Contains(t, reply.Message, "execution.runnerId")
}

func TestCancelQueuedAndRunning(t *testing.T) {
	f := newFixture(t, 1, 4)
	probe := f.system.NewProbe()
	a, b := dispatch(), dispatch()
	f.submit(t, a, probe.PID())
	f.submit(t, b, probe.PID())

	res, err := f.system.Root.RequestFuture(f.root, messages.CancelAttempt{AttemptID: b.AttemptID()}, within).Result()
	require.NoError(t, err)
	assert.True(t, res.(messages.CancelReply).Found)
	got := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == b.AttemptID() })
	assert.Equal(t, messages.StatusCancelled, got.Outcome.Status)

	res, err = f.system.Root.RequestFuture(f.root, messages.CancelAttempt{AttemptID: a.AttemptID()}, within).Result()
	require.NoError(t, err)
	assert.True(t, res.(messages.CancelReply).Found)
	got = actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == a.AttemptID() })
	assert.Equal(t, messages.StatusCancelled, got.Outcome.Status)

	res, err = f.system.Root.RequestFuture(f.root, messages.CancelAttempt{AttemptID: "nope"}, within).Result()
	require.NoError(t, err)
	assert.False(t, res.(messages.CancelReply).Found)

	// With a code, a queued attempt ends failed with it, not cancelled.
	c, e := dispatch(), dispatch()
	f.submit(t, c, probe.PID())
	f.submit(t, e, probe.PID())
	res, err = f.system.Root.RequestFuture(f.root, messages.CancelAttempt{AttemptID: e.AttemptID(), Reason: "declared lost", Code: failure.SandboxRunnerLost}, within).Result()
	require.NoError(t, err)
	assert.True(t, res.(messages.CancelReply).Found)
	got = actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == e.AttemptID() })
	assert.Equal(t, messages.StatusFailed, got.Outcome.Status)
	assert.Equal(t, string(failure.SandboxRunnerLost), got.Outcome.Code)
	assert.Contains(t, got.Outcome.Message, "declared lost")
}

// crashedLedger is the ledger an attempt had written when it crashed.
func crashedLedger(d *messages.Dispatch) ledger.Entry {
	owner := dockerops.OwnershipOf(d)
	return ledger.Entry{
		SchemaVersion: ledger.SchemaVersion, AttemptID: owner.AttemptID, ExecutionLeaseID: owner.ExecutionLeaseID,
		FencingToken: owner.FencingToken, RunnerID: owner.RunnerID, RunnerInstanceID: owner.RunnerInstanceID,
		WorktreeKey: d.Lease.WorktreeKey, ExpiresAt: d.Lease.ExpiresAt, State: ledger.Active,
		Planned: []ledger.Resource{{Type: ledger.ResourceNetwork, Name: "forge-x", Role: "internal"}},
		Created: []ledger.Resource{},
	}
}

// crashing declares the fake attempts' panics expected.
func (f *fixture) crashing() {
	f.system.AllowFailures(func(reason any) bool { return strings.Contains(fmt.Sprint(reason), "on purpose") })
}

func TestCrashedAttemptIsTornDownByLabelAndFreesItsSlot(t *testing.T) {
	f := newFixture(t, 1, 1)
	f.crashing()
	probe := f.system.NewProbe()
	a, b := dispatch(), dispatch()
	f.submit(t, a, probe.PID())
	f.submit(t, b, probe.PID())
	require.NoError(t, f.ledgers.Write(crashedLedger(a)))

	f.system.Root.Send(f.attemptPID(t, a), crashNow{})
	got := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == a.AttemptID() })
	assert.Equal(t, messages.StatusFailed, got.Outcome.Status)
	assert.Equal(t, "sandbox_runtime_failed", got.Outcome.Code)
	assert.False(t, got.Outcome.Degraded, got.Outcome.Message)
	require.NotNil(t, got.Outcome.Cleanup)
	calls := f.cleaner.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, dockerops.OwnershipOf(a), calls[0])

	// The same durability as the attempt's own teardown: the report is
	// pending, the released ledger is gone.
	reports, err := f.ledgers.PendingReports()
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, got.Outcome.Cleanup.ReportID, reports[0].ReportID)
	_, err = f.ledgers.Read(a.AttemptID())
	assert.ErrorIs(t, err, fs.ErrNotExist)

	require.Eventually(t, func() bool {
		s := f.snapshot(t)
		return len(s.Attempts) == 1 && s.Attempts[0] == b.AttemptID()
	}, within, 10*time.Millisecond)
}

func TestCrashedAttemptWhoseTeardownFailsKeepsItsLedgerDegraded(t *testing.T) {
	f := newFixture(t, 1, 1)
	f.crashing()
	f.cleaner.err = failure.New(failure.SandboxTeardownFailed, "one object remains")
	probe := f.system.NewProbe()
	a := dispatch()
	f.submit(t, a, probe.PID())
	require.NoError(t, f.ledgers.Write(crashedLedger(a)))

	f.system.Root.Send(f.attemptPID(t, a), crashNow{})
	got := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == a.AttemptID() })
	assert.True(t, got.Outcome.Degraded)
	assert.Contains(t, got.Outcome.Message, "one object remains")
	entry, err := f.ledgers.Read(a.AttemptID())
	require.NoError(t, err)
	assert.Equal(t, ledger.Degraded, entry.State, "kept for the reaper")
	reports, err := f.ledgers.PendingReports()
	require.NoError(t, err)
	assert.Len(t, reports, 1)

	// The snapshot counts it degraded until a reaper round reaps its
	// ledger; the total since the start stays.
	require.Eventually(t, func() bool { s := f.snapshot(t); return s.Degraded == 1 && s.DegradedTotal == 1 }, within, time.Millisecond)
	f.system.Root.Send(f.root, reaped{attemptIDs: []string{"some-other-attempt"}})
	assert.Equal(t, 1, f.snapshot(t).Degraded, "another attempt's reaping clears nothing")
	f.system.Root.Send(f.root, reaped{attemptIDs: []string{a.AttemptID()}})
	s := f.snapshot(t)
	assert.Equal(t, 0, s.Degraded, "the reaper cleared it")
	assert.Equal(t, 1, s.DegradedTotal)
}

// spawnStopSupervised spawns props under a parent that stops (never
// restarts) failing children, as the attempt does with its build actor.
func spawnStopSupervised(system *actortest.System, props *actor.Props) *actor.PID {
	child := make(chan *actor.PID, 1)
	stop := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	system.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			child <- ctx.Spawn(props)
		}
	}, actor.WithSupervisor(stop)))
	return <-child
}

// granted expects the permit to be granted to the user named key.
func granted(t *testing.T, probe *actortest.Probe, key string) {
	t.Helper()
	got := actortest.Expect[actortest.PermitGranted](t, probe, within)
	assert.Equal(t, key, got.Key, "granted out of order")
}

func TestBuildPermitIsFIFOAndReleasedWhenItsHolderCrashes(t *testing.T) {
	f := newFixture(t, 1, 1)
	f.crashing()
	grants := f.system.NewProbe()
	first := spawnStopSupervised(f.system, actortest.PermitUser(f.root, "first", grants))
	granted(t, grants, "first")
	second := f.system.Spawn(actortest.PermitUser(f.root, "second", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 1 }, within, time.Millisecond)
	third := f.system.Spawn(actortest.PermitUser(f.root, "third", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 2 }, within, time.Millisecond)
	actortest.ExpectNoMessage[actortest.PermitGranted](t, grants, time.Minute)

	// The holder crashes and is stopped by its parent: the permit passes to
	// the next waiter in order.
	f.system.Root.Send(first, actortest.Crash{Reason: "builder crashed on purpose while holding the permit"})
	granted(t, grants, "second")
	f.system.Root.Send(second, actortest.ReleasePermit{})
	granted(t, grants, "third")
	f.system.Root.Stop(third)
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 0 }, within, time.Millisecond)
}

// A pool of two permits: builds of different keys run side by side, a
// second build of a key being built waits (and lets a later key pass), and
// a release hands the permit to the first waiter that may hold one.
func TestBuildPermitPoolRunsOneBuildPerKey(t *testing.T) {
	f := newFixtureWithPermits(t, 1, 1, 2)
	grants := f.system.NewProbe()
	grantedTo := func(user string) {
		t.Helper()
		got := actortest.Expect[actortest.PermitGranted](t, grants, within)
		assert.Equal(t, user, got.User, "granted out of order")
	}
	a1 := f.system.Spawn(actortest.PermitUserOf(f.root, "a1", "key-a", grants))
	grantedTo("a1")
	a2 := f.system.Spawn(actortest.PermitUserOf(f.root, "a2", "key-a", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 1 }, within, time.Millisecond)
	actortest.ExpectNoMessage[actortest.PermitGranted](t, grants, time.Minute)

	// key-b passes a2, which waits for key-a's build, not for a permit.
	b := f.system.Spawn(actortest.PermitUserOf(f.root, "b", "key-b", grants))
	grantedTo("b")
	c := f.system.Spawn(actortest.PermitUserOf(f.root, "c", "key-c", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 2 }, within, time.Millisecond)
	assert.Equal(t, "2", f.inspect(t).Facts["buildPermits"])

	// b's permit goes to c: a2 still may not build key-a beside a1.
	f.system.Root.Send(b, actortest.ReleasePermit{})
	grantedTo("c")
	actortest.ExpectNoMessage[actortest.PermitGranted](t, grants, time.Minute)
	// a1 ends: a2 builds key-a (and finds a1's image in the cache).
	f.system.Root.Stop(a1)
	grantedTo("a2")
	f.system.Root.Send(a2, actortest.ReleasePermit{})
	f.system.Root.Send(c, actortest.ReleasePermit{})
	require.Eventually(t, func() bool {
		return f.snapshot(t).BuildQueue == 0 && f.inspect(t).Facts["buildPermitHolders"] == ""
	}, within, time.Millisecond)
}

// countedBuild is a messages.RunningBuild counting its cancellations.
type countedBuild struct{ cancels atomic.Int32 }

func (b *countedBuild) Cancel() { b.cancels.Add(1) }

// A holder giving up hands its permit, with its running build, to the
// first waiter of its key (passing a waiter of another key, which may not
// hold a permit now), so the pool's count is unchanged; a holder that
// terminates with a handed-over build cancels it; with no waiter of its
// key the permit is released and the holder told so.
func TestBuildPermitIsHandedOverWithItsBuild(t *testing.T) {
	f := newFixtureWithPermits(t, 1, 1, 2)
	grants := f.system.NewProbe()
	grantedTo := func(user string) actortest.PermitGranted {
		t.Helper()
		got := actortest.Expect[actortest.PermitGranted](t, grants, within)
		assert.Equal(t, user, got.User, "granted out of order")
		return got
	}
	handedOver := func(user string, want bool) {
		t.Helper()
		got := actortest.Expect[actortest.PermitHandedOver](t, grants, within)
		assert.Equal(t, actortest.PermitHandedOver{User: user, HandedOver: want}, got)
	}
	a1 := f.system.Spawn(actortest.PermitUserOf(f.root, "a1", "key-a", grants))
	grantedTo("a1")
	b := f.system.Spawn(actortest.PermitUserOf(f.root, "b", "key-b", grants))
	grantedTo("b")
	f.system.Spawn(actortest.PermitUserOf(f.root, "c", "key-c", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 1 }, within, time.Millisecond)
	a2 := f.system.Spawn(actortest.PermitUserOf(f.root, "a2", "key-a", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 2 }, within, time.Millisecond)

	build := &countedBuild{}
	f.system.Root.Send(a1, actortest.HandOverPermit{Build: build})
	got := grantedTo("a2")
	assert.Same(t, build, got.Build, "the running build comes with the permit")
	handedOver("a1", true)
	assert.Equal(t, 1, f.snapshot(t).BuildQueue, "c still waits: the pool is full")
	assert.Zero(t, build.cancels.Load())

	// a2 ends holding the handed-over build: it is cancelled, and c gets
	// the permit.
	f.system.Root.Stop(a2)
	grantedTo("c")
	require.Eventually(t, func() bool { return build.cancels.Load() == 1 }, within, time.Millisecond)

	// No one waits for key-b: b's permit is released.
	f.system.Root.Send(b, actortest.HandOverPermit{Build: &countedBuild{}})
	handedOver("b", false)
	require.Eventually(t, func() bool { return !strings.Contains(f.inspect(t).Facts["buildPermitHolders"], b.Id) }, within, time.Millisecond)
	assert.Zero(t, f.snapshot(t).BuildQueue)
}

func TestWaiterThatStopsLeavesTheQueue(t *testing.T) {
	f := newFixture(t, 1, 1)
	grants := f.system.NewProbe()
	holder := f.system.Spawn(actortest.PermitUser(f.root, "holder", grants))
	granted(t, grants, "holder")
	waiter := f.system.Spawn(actortest.PermitUser(f.root, "waiter", grants))
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 1 }, within, time.Millisecond)
	require.NoError(t, f.system.Root.StopFuture(waiter).Wait())
	require.Eventually(t, func() bool { return f.snapshot(t).BuildQueue == 0 }, within, time.Millisecond)
	f.system.Root.Send(holder, actortest.ReleasePermit{})
	actortest.ExpectNoMessage[actortest.PermitGranted](t, grants, time.Minute)
}

// The duplicate check follows an attempt through the queue: refused while
// queued, refused once it runs, and free again once cancelled from the
// queue (the supervisor forgets it; the runner's retention is another
// layer).
func TestDuplicateCheckFollowsTheQueue(t *testing.T) {
	f := newFixture(t, 1, 2)
	probe := f.system.NewProbe()
	a, b, c := dispatch(), dispatch(), dispatch()
	require.True(t, f.submit(t, a, probe.PID()).Accepted)
	require.True(t, f.submit(t, b, probe.PID()).Queued)
	require.True(t, f.submit(t, c, probe.PID()).Queued)
	assert.Equal(t, "attempt_duplicate", f.submit(t, b, probe.PID()).Code)

	res, err := f.system.Root.RequestFuture(f.root, messages.CancelAttempt{AttemptID: c.AttemptID()}, within).Result()
	require.NoError(t, err)
	require.True(t, res.(messages.CancelReply).Found)
	assert.Equal(t, messages.SubmitReply{AttemptID: c.AttemptID(), Accepted: true, Queued: true}, f.submit(t, c, probe.PID()))

	// a finishes: b leaves the queue for the slot and is still a duplicate.
	f.system.Root.Send(f.attemptPID(t, a), finishNow{})
	require.Eventually(t, func() bool {
		s := f.snapshot(t)
		return s.Queued == 1 && len(s.Attempts) == 1 && s.Attempts[0] == b.AttemptID()
	}, within, 10*time.Millisecond)
	assert.Equal(t, "attempt_duplicate", f.submit(t, b, probe.PID()).Code)
	assert.Equal(t, "attempt_duplicate", f.submit(t, c, probe.PID()).Code)
}
