package scenario_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/actortest/scenario"
	"github.com/forgedev/forged/example"
	"github.com/forgedev/forged/failure"
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
	a := s.Submit(s.Dispatch("true"))
	running(t, s)
	actortest.ExpectNoMessage[messages.AttemptFinished](t, a.Probe, 59*time.Minute)
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
