package scenario_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/actortest/scenario"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// failingGit fails the host git's preparation.
type failingGit struct{ actors.Git }

func (failingGit) Prepare(context.Context, *messages.Dispatch, string) (*gitops.Prepared, error) {
	return nil, failure.New(failure.SandboxInputFailed, "injected: the input ref is gone")
}

// Every step of an attempt, failed by the engine (or the host git): the
// attempt fails with the step's code, in the step's phase, and leaves the
// engine clean, its ledger removed, its slot and the build permit free.
func TestAFaultAtEveryStepIsCleanedUp(t *testing.T) {
	engineFault := func(op string) func(*scenario.Scenario) {
		return func(s *scenario.Scenario) {
			s.Engine.Inject(op, fakeengine.Fault{Status: 500, Message: "injected failure of " + op})
		}
	}
	cases := []struct {
		step   string
		inject func(*scenario.Scenario)
		opts   scenario.Options
		code   failure.Code
		phase  string
	}{
		{step: "prepare (host git)", opts: scenario.Options{WrapGit: func(g actors.Git) actors.Git { return failingGit{g} }},
			code: failure.SandboxInputFailed, phase: messages.PhasePreparing},
		{step: "image lookup", inject: engineFault(fakeengine.OpImageInspect), code: failure.SandboxBuildFailed, phase: messages.PhaseBuilding},
		{step: "image build refused", inject: engineFault(fakeengine.OpImageBuild), code: failure.SandboxBuildFailed, phase: messages.PhaseBuilding},
		{step: "image build step fails", inject: func(s *scenario.Scenario) { s.Engine.FailBuilds(1, "RUN make: exit code 2") },
			code: failure.SandboxBuildFailed, phase: messages.PhaseBuilding},
		// No network step: a worker without network policy runs with
		// NetworkMode none.
		{step: "volume create", inject: engineFault(fakeengine.OpVolumeCreate), code: failure.SandboxCreateFailed, phase: messages.PhaseProvisioning},
		{step: "container create", inject: engineFault(fakeengine.OpContainerCreate), code: failure.SandboxCreateFailed, phase: messages.PhaseRunning},
		{step: "copy the bundle in", inject: engineFault(fakeengine.OpArchivePut), code: failure.SandboxCreateFailed, phase: messages.PhaseRunning},
		{step: "attach", inject: engineFault(fakeengine.OpContainerAttach), code: failure.SandboxWorkerFailed, phase: messages.PhaseRunning},
		{step: "start", inject: engineFault(fakeengine.OpContainerStart), code: failure.SandboxWorkerFailed, phase: messages.PhaseRunning},
		{step: "wait", inject: engineFault(fakeengine.OpContainerWait), code: failure.SandboxWorkerFailed, phase: messages.PhaseRunning},
		{step: "inspect", inject: engineFault(fakeengine.OpContainerInspect), code: failure.SandboxRuntimeFailed, phase: messages.PhaseRunning},
		{step: "copy the output out", inject: engineFault(fakeengine.OpArchiveGet), code: failure.SandboxRuntimeFailed, phase: messages.PhaseCollecting},
		{step: "worker OOM-killed", inject: func(s *scenario.Scenario) {
			s.Engine.RunAll(func(_ context.Context, p *fakeengine.Process) int { p.Container.SetOOMKilled(); return 137 })
		}, code: failure.SandboxOOMKilled, phase: messages.PhaseRunning},
		{step: "worker crashes", inject: func(s *scenario.Scenario) { s.Engine.RunAll(fakeengine.Exit(70)) },
			code: failure.SandboxWorkerFailed, phase: messages.PhaseCollecting},
	}
	for _, c := range cases {
		t.Run(c.step, func(t *testing.T) {
			s := scenario.New(t, c.opts)
			if c.inject != nil {
				c.inject(s)
			}
			a := s.Submit(s.Dispatch("sh", "-c", "echo hi > hello.txt"))
			out := a.Outcome()
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(c.code), out.Code, out.Message)
			assert.Equal(t, c.phase, out.Phase, out.Message)
			assert.False(t, out.Degraded, "teardown left something: %s", out.Message)
			s.Engine.Clear("")
			s.AssertReleased(a)
		})
	}
}
