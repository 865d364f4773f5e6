package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// TestAdmissionHoldRefusesNewWorkOnly: while admission is held (a fleet
// member cut off from etcd) a dispatch is refused with the hold's code
// and reason, and no log or attempt is left of it; an attempt admitted
// before the hold runs on to its outcome; the snapshot says why; after
// the release the same dispatch is admitted.
func TestAdmissionHoldRefusesNewWorkOnly(t *testing.T) {
	e := newE2E(t, runner.Config{})
	before := e.dispatch([]string{"/bin/sh", "-c", "sleep 1; echo ran > ran.txt"}, 0)
	running := e.submit(before)

	e.runner.HoldAdmission(failure.FleetMemberCutOff, "cut off from etcd")
	d := e.dispatch([]string{"/bin/true"}, 0)
	reply, err := e.runner.Submit(d)
	require.NoError(t, err)
	assert.False(t, reply.Accepted)
	assert.Equal(t, string(failure.FleetMemberCutOff), reply.Code)
	assert.Equal(t, "cut off from etcd", reply.Message)
	_, known := e.runner.Logs().Get(d.AttemptID())
	assert.False(t, known, "a refused dispatch leaves no log")
	snap, err := e.runner.Snapshot()
	require.NoError(t, err)
	require.NotNil(t, snap.AdmissionHeld)
	assert.Equal(t, string(failure.FleetMemberCutOff), snap.AdmissionHeld.Code)
	assert.NotContains(t, snap.Attempts, d.AttemptID())

	out := e.wait(running)
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)

	e.runner.ReleaseAdmission()
	snap, err = e.runner.Snapshot()
	require.NoError(t, err)
	assert.Nil(t, snap.AdmissionHeld)
	out = e.wait(e.submit(d))
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
}
