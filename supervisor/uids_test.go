package supervisor

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

func user(uid int) messages.SandboxUser { return messages.SandboxUser{UID: uid, GID: uid} }

func TestUIDSlotsGiveTheLowestFreeUIDAndReuseReleasedOnes(t *testing.T) {
	u := newUIDSlots(100000, 3)
	for i, id := range []string{"a", "b", "c"} {
		got, ok := u.take(id)
		require.True(t, ok)
		assert.Equal(t, user(100000+i), got)
	}
	_, ok := u.take("d")
	assert.False(t, ok, "three slots, three uids")

	u.release("b")
	got, ok := u.take("d")
	require.True(t, ok)
	assert.Equal(t, user(100001), got, "the released uid is reused")
	assert.Equal(t, user(100001), u.of("d"))
	assert.Equal(t, messages.SandboxUser{}, u.of("b"))

	u.release("b") // twice, and an unknown attempt: nothing happens
	u.release("nobody")
	_, ok = u.take("e")
	assert.False(t, ok, "a second release of b frees nothing")
}

// Whatever the order of admissions and finishes, no two live attempts
// share a uid and every uid lies in the range.
func TestUIDSlotsNeverShareAUIDBetweenLiveAttempts(t *testing.T) {
	const base, size = 200000, 4
	u := newUIDSlots(base, size)
	live := map[string]messages.SandboxUser{}
	for step := range 400 {
		id := fmt.Sprintf("a%d", step)
		if len(live) < size && step%3 != 2 {
			got, ok := u.take(id)
			require.True(t, ok, "a free slot has a free uid")
			live[id] = got
		} else {
			for victim := range live { // an arbitrary live attempt finishes
				u.release(victim)
				delete(live, victim)
				break
			}
		}
		seen := map[int]string{}
		for id, got := range live {
			assert.GreaterOrEqual(t, got.UID, base)
			assert.Less(t, got.UID, base+size)
			assert.Equal(t, got.UID, got.GID)
			other, dup := seen[got.UID]
			require.False(t, dup, "step %d: %s and %s share uid %d", step, id, other, got.UID)
			seen[got.UID] = id
		}
	}
}

// An adopted attempt holds the uid its ledger recorded: take skips it
// until the adopted attempt finishes; a uid outside the range is held
// without costing one of the range.
func TestUIDSlotsHoldAdoptedUIDs(t *testing.T) {
	u := newUIDSlots(100000, 2)
	assert.True(t, u.hold("adopted", user(100000)))
	assert.True(t, u.hold("legacy", messages.ImageUser))
	got, ok := u.take("new")
	require.True(t, ok)
	assert.Equal(t, user(100001), got)
	_, ok = u.take("newer")
	assert.False(t, ok)

	// A damaged ledger naming a held uid: held twice, freed only when both end.
	assert.False(t, u.hold("twin", user(100000)))
	u.release("adopted")
	u.release("new")
	got, ok = u.take("after")
	require.True(t, ok)
	assert.Equal(t, user(100001), got, "100000 is still the twin's")
	u.release("twin")
	got, ok = u.take("last")
	require.True(t, ok)
	assert.Equal(t, user(100000), got)
}

func TestUIDSlotsWithoutARangeGiveTheZeroUser(t *testing.T) {
	u := newUIDSlots(0, 2)
	for _, id := range []string{"a", "b", "c"} {
		got, ok := u.take(id)
		require.True(t, ok)
		assert.True(t, got.IsZero())
	}
}

func TestValidateUIDRange(t *testing.T) {
	require.NoError(t, ValidateUIDRange(DefaultUIDBase, 64))
	require.NoError(t, ValidateUIDRange(MinUIDBase, 1))
	for name, c := range map[string]struct{ base, slots int }{
		"below the minimum": {10001, 4},
		"root":              {0, 4},
		"no slot":           {DefaultUIDBase, 0},
		"past the top":      {1<<31 - 3, 4},
		"over nobody":       {65530, 8},
	} {
		err := ValidateUIDRange(c.base, c.slots)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "sandbox", name)
	}
}

// userRecorder is an attempt factory that records the user each attempt
// was given.
type userRecorder struct {
	mu    sync.Mutex
	users map[string]messages.SandboxUser
}

func (r *userRecorder) factory(d *messages.Dispatch, u messages.SandboxUser, subscriber, _ *actor.PID) *actor.Props {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users[d.AttemptID()] = u
	return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: d, subscriber: subscriber} })
}

func (r *userRecorder) of(id string) (messages.SandboxUser, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.users[id]
	return u, ok
}

// The supervisor gives each admitted attempt its slot's uid, a queued
// attempt the uid its predecessor released, and an adopted attempt the
// uid its ledger recorded (which no new attempt gets while it runs).
func TestSupervisorGivesEachSlotItsOwnUID(t *testing.T) {
	rec := &userRecorder{users: map[string]messages.SandboxUser{}}
	sys := actortest.NewSystem(t)
	adopted := dispatch()
	adoptProbe := sys.NewProbe()
	f := &fixture{system: sys, cleaner: &fakeCleaner{}, ledgers: ledger.Store{Root: t.TempDir()}}
	f.root = sys.Spawn(Props(Config{
		Slots: 3, UIDBase: 300000, QueueLimit: 4, Cleaner: f.cleaner, Ledgers: f.ledgers, NewAttempt: rec.factory,
		Adopt: func(*actor.ActorSystem) []Adoption {
			return []Adoption{{Dispatch: adopted, User: user(300001), Subscriber: adoptProbe.PID(),
				NewAttempt: func(subscriber, _ *actor.PID) *actor.Props {
					return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: adopted, subscriber: subscriber} })
				}}}
		},
	}))
	probe := sys.NewProbe()
	a, b, c := dispatch(), dispatch(), dispatch()
	require.True(t, f.submit(t, a, probe.PID()).Accepted)
	require.True(t, f.submit(t, b, probe.PID()).Accepted)
	reply := f.submit(t, c, probe.PID())
	require.True(t, reply.Queued, "the adopted attempt holds the third slot")

	ua, _ := rec.of(a.AttemptID())
	ub, _ := rec.of(b.AttemptID())
	assert.Equal(t, user(300000), ua)
	assert.Equal(t, user(300002), ub, "300001 is the adopted attempt's")

	// The adopted attempt finishes: c is admitted with the uid it released.
	f.system.Root.Send(f.attemptPID(t, adopted), finishNow{})
	actortest.ExpectWhere(t, adoptProbe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == adopted.AttemptID() })
	require.Eventually(t, func() bool { _, ok := rec.of(c.AttemptID()); return ok }, within, 10*time.Millisecond)
	uc, _ := rec.of(c.AttemptID())
	assert.Equal(t, user(300001), uc)

	// a finishes; a new attempt gets a's uid, never one still held.
	f.system.Root.Send(f.attemptPID(t, a), finishNow{})
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptFinished) bool { return m.Outcome.AttemptID == a.AttemptID() })
	d := dispatch()
	require.True(t, f.submit(t, d, probe.PID()).Accepted) // admitted at once, or once a's finish is in
	require.Eventually(t, func() bool { _, ok := rec.of(d.AttemptID()); return ok }, within, 10*time.Millisecond)
	ud, _ := rec.of(d.AttemptID())
	assert.Equal(t, user(300000), ud)
}
