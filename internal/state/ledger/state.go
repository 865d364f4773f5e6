package ledger

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// State is the lease state of an attempt's isolation: which phase of its
// life its Docker objects are in.
type State string

// Lease states.
const (
	// Starting: the attempt's objects are planned or being created.
	Starting State = "starting"
	// Active: every object exists and the worker may run.
	Active State = "active"
	// Releasing: teardown (or a reap) is removing the objects.
	Releasing State = "releasing"
	// Released: teardown completed; the ledger is about to be removed.
	Released State = "released"
	// Degraded: a teardown failed; the objects need reaping.
	Degraded State = "degraded"
)

// transitions lists, for each state, the states it may move to. Released
// is final. Every other state may become degraded; a degraded lease may
// only be released again (by a retried teardown or a reap). Starting may
// go straight to releasing: an attempt that fails while provisioning is
// torn down without ever becoming active.
var transitions = map[State][]State{
	Starting:  {Active, Releasing, Degraded},
	Active:    {Releasing, Degraded},
	Releasing: {Released, Degraded},
	Degraded:  {Releasing},
	Released:  nil,
}

// Known reports whether s is one of the five lease states.
func (s State) Known() bool {
	_, ok := transitions[s]
	return ok
}

// CanTransition reports whether a lease in state s may move to state to.
// Staying in the same state is allowed for every state but released, so
// that a cleanup path may re-assert releasing or degraded.
func (s State) CanTransition(to State) bool {
	if !s.Known() || !to.Known() {
		return false
	}
	if s == to {
		return s != Released
	}
	for _, next := range transitions[s] {
		if next == to {
			return true
		}
	}
	return false
}

// Transition returns a copy of e in state to, or CodeLeaseTransition when
// the transition table forbids it. e itself is not changed.
func (e Entry) Transition(to State) (Entry, error) {
	if !e.State.CanTransition(to) {
		return e, failure.New(CodeLeaseTransition, "lease of attempt %s cannot move from %q to %q",
			text.Ellipsis(e.AttemptID, 64), text.Ellipsis(string(e.State), 32), text.Ellipsis(string(to), 32))
	}
	next := e
	next.State = to
	return next, nil
}
