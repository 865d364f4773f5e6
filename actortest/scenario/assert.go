package scenario

import (
	"errors"
	"io/fs"
	"time"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/messages"
)

// AssertReleased checks that a finished attempt left nothing behind: no
// object of the engine carries its attempt label, its ledger is gone, its
// slot is free (the supervisor runs nothing and queues nothing of it) and
// the build permit can be taken (and is given back).
func (s *Scenario) AssertReleased(a *Attempt) {
	s.t.Helper()
	id := a.Dispatch.AttemptID()
	s.Engine.AssertClean(s.t, dockerops.LabelAttemptID+"="+id)
	if _, err := s.Ledgers.Read(id); !errors.Is(err, fs.ErrNotExist) {
		s.t.Errorf("scenario: the ledger of %s is still there (%v)", id, err)
	}
	deadline := time.Now().Add(actortest.DefaultWithin)
	for {
		snap := s.Snapshot()
		if snap.Active == 0 && snap.Starting == 0 && snap.Queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.t.Errorf("scenario: the slot is not released: %+v", snap)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	granted := s.Sys.NewProbe()
	user := s.Sys.Spawn(actortest.PermitUser(s.Supervisor, "scenario-permit-check", granted))
	actortest.Expect[actortest.PermitGranted](s.t, granted, actortest.DefaultWithin)
	s.Sys.Root.Send(user, actortest.ReleasePermit{})
	deadline = time.Now().Add(actortest.DefaultWithin)
	for s.Snapshot().BuildQueue != 0 {
		if time.Now().After(deadline) {
			s.t.Errorf("scenario: the build queue does not drain")
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Succeeded fails the test unless out succeeded.
func (s *Scenario) Succeeded(out messages.AttemptOutcome) {
	s.t.Helper()
	if out.Status != messages.StatusSucceeded {
		s.t.Fatalf("scenario: the attempt %s: %s %s (phase %s)", out.Status, out.Code, out.Message, out.Phase)
	}
}
