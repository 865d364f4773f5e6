package scenario_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/actortest/scenario"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func TestAWholeAttemptLandsItsResult(t *testing.T) {
	s := scenario.New(t)
	a := s.Submit(s.Dispatch("sh", "-c", "echo 'hello from the fake engine' > hello.txt"))
	out := a.Outcome()
	s.Succeeded(out)
	assert.Equal(t, out.ResultCommitSHA, git(t, s.Repo, "rev-parse", "refs/heads/"+example.Branch))
	assert.Equal(t, "hello from the fake engine", git(t, s.Repo, "show", example.Branch+":hello.txt"))
	assert.Contains(t, a.EventTypes(), "sandbox_output_imported")
	s.AssertReleased(a)
}

// running waits until the attempt's worker container runs.
func running(t *testing.T, s *scenario.Scenario) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range s.Engine.Containers() {
			if c.State().Running {
				return true
			}
		}
		return false
	}, actortest.DefaultWithin, time.Millisecond)
}

func TestLeaseExpiryOnTheManualClockStopsTheWorker(t *testing.T) {
	s := scenario.New(t)
	s.Engine.RunAll(fakeengine.Block())
	d := s.Dispatch("true")
	// The lease ends first: before the task's hard wall (none) and the
	// idle limit (10 minutes by default).
	d.Task.TimeoutSeconds = 0
	d.Lease.ExpiresAt = s.Sys.Clock.Now().Add(5 * time.Minute)
	a := s.Submit(d)
	a.Started()
	actortest.ExpectNoMessage[messages.AttemptFinished](t, a.Probe, 4*time.Minute)
	s.Sys.Advance(time.Minute)
	out := a.Outcome()
	assert.Equal(t, string(failure.SandboxLeaseExpired), out.Code, out.Message)
	s.AssertReleased(a)
}

func TestCancellationMidRunTearsDown(t *testing.T) {
	s := scenario.New(t)
	s.Engine.RunAll(fakeengine.Block())
	a := s.Submit(s.Dispatch("true"))
	running(t, s)
	reply := actortest.Request[messages.CancelReply](t, s.Sys, s.Supervisor, messages.CancelAttempt{AttemptID: a.Dispatch.AttemptID(), Reason: "operator"})
	require.True(t, reply.Found)
	out := a.Outcome()
	assert.Equal(t, messages.StatusCancelled, out.Status)
	assert.Equal(t, string(failure.SandboxCancelled), out.Code)
	assert.GreaterOrEqual(t, s.Engine.CallCount(fakeengine.OpContainerStop), 1)
	s.AssertReleased(a)
}

func TestEngineRestartDuringTheRun(t *testing.T) {
	s := scenario.New(t)
	s.Engine.RunAll(fakeengine.Block())
	a := s.Submit(s.Dispatch("true"))
	running(t, s)
	require.NoError(t, s.Engine.Restart())
	out := a.Outcome()
	assert.Equal(t, messages.StatusFailed, out.Status)
	// The stream breaks (a reset: runtime failure) or ends and the worker
	// is found exited 255 (worker failure), depending on what the client
	// reads first.
	assert.Contains(t, []string{string(failure.SandboxRuntimeFailed), string(failure.SandboxWorkerFailed)}, out.Code, out.Message)
	s.AssertReleased(a)
}

// A teardown the engine refuses leaves the attempt degraded: its ledger is
// kept for the reaper, the objects are still labelled, its slot is free.
func TestARefusedTeardownIsDegradedAndKeepsTheLedger(t *testing.T) {
	s := scenario.New(t)
	s.Engine.Inject(fakeengine.OpVolumeRemove, fakeengine.Fault{Status: 409, Message: "volume is in use"})
	a := s.Submit(s.Dispatch("sh", "-c", "echo hi > hello.txt"))
	out := a.Outcome()
	assert.True(t, out.Degraded, "%+v", out)
	assert.Contains(t, a.EventTypes(), "teardown_failed")
	entry, err := s.Ledgers.Read(a.Dispatch.AttemptID())
	require.NoError(t, err, "the ledger is kept for the reaper")
	assert.Equal(t, ledger.Degraded, entry.State)
	assert.NotEmpty(t, s.Engine.Labelled(dockerops.LabelAttemptID+"="+a.Dispatch.AttemptID()))
	require.Eventually(t, func() bool { snap := s.Snapshot(); return snap.Active == 0 && snap.Degraded == 1 }, actortest.DefaultWithin, time.Millisecond)

	// Once the engine lets go, a teardown by label (the reaper's) leaves
	// nothing.
	s.Engine.Clear("")
	report, err := s.Docker.Teardown(context.Background(), dockerops.OwnershipOf(a.Dispatch), "reaper")
	require.NoError(t, err)
	assert.Zero(t, report.Remaining)
	s.Engine.AssertClean(t, dockerops.LabelAttemptID+"="+a.Dispatch.AttemptID())
}

// A worker that writes nothing for the idle limit (10 minutes) is stopped,
// measured on the host's (manual) clock; the hard wall (8 hours without a
// task timeout) is far.
func TestTheIdleLimitOnTheManualClock(t *testing.T) {
	s := scenario.New(t)
	s.Engine.RunAll(fakeengine.Block())
	d := s.Dispatch("true")
	d.Task.TimeoutSeconds = 0
	d.Lease.ExpiresAt = s.Sys.Clock.Now().Add(24 * time.Hour)
	a := s.Submit(d)
	a.Started()
	actortest.ExpectNoMessage[messages.AttemptFinished](t, a.Probe, 10*time.Minute-time.Second)
	// The idle limit, then the worker's grace to stop its task (this
	// program does not), pass on the clock.
	out := a.OutcomeAdvancing(time.Second)
	assert.Equal(t, string(failure.SandboxIdleTimeout), out.Code, out.Message)
	s.AssertReleased(a)
}
