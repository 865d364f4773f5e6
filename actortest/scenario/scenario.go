// Package scenario runs whole attempts, the real supervisor and attempt
// tree with the real dockerops and gitops code, against a fake Docker
// Engine (package fakeengine) and a temporary git repository, with the
// real worker (package worker) running in-process as the container's
// program. A test reads the attempt's events and outcome, and checks that
// it left nothing behind:
//
//	s := scenario.New(t)
//	s.Engine.Inject(fakeengine.OpVolumeCreate, fakeengine.Fault{Status: 500})
//	a := s.Submit(s.Dispatch("sh", "-c", "echo hi > hello.txt"))
//	out := a.Outcome()
//	s.AssertReleased(a)
//
// Everything runs on the test's actortest.System (manual clock, dead
// letters and panics fail the test, goroutine leak check). The worker runs
// the task as a host process in the container's directories: use tasks
// that only touch their working directory.
package scenario

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// Scenario is a forged root supervisor on a fake engine, with a git
// repository to work on.
type Scenario struct {
	t          testing.TB
	Sys        *actortest.System
	Engine     *fakeengine.Engine
	Docker     *dockerops.Client
	Repo       string // the host repository attempts work on
	StateRoot  string
	Ledgers    ledger.Store
	Supervisor *actor.PID
	// Wrap, set before the first Submit, wraps the Docker client the
	// attempts use (to inject a fault in dockerops' own code).
	runnerID string
}

// Options shape a scenario.
type Options struct {
	// Slots is the supervisor's fixed capacity (default 2).
	Slots int
	// WrapDocker wraps the Docker client the attempts use.
	WrapDocker func(actors.Docker) actors.Docker
	// Git replaces the host git (default actors.GitHost on the scenario's
	// state root), for faults in the git steps.
	WrapGit func(actors.Git) actors.Git
	// System options (leak check, allowed failures, …).
	System []actortest.Option
}

// New starts a scenario: a fake engine running the real worker in every
// container (and the lease-update command in execs), a repository with a
// sandbox contract and Dockerfile on main, and a root supervisor.
func New(t testing.TB, opts ...Options) *Scenario {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Slots <= 0 {
		o.Slots = 2
	}
	s := &Scenario{t: t, StateRoot: t.TempDir(), runnerID: example.NewUUID()}
	s.Sys = actortest.NewSystem(t, o.System...)
	s.Engine = fakeengine.New(t)
	s.Engine.RunAll(WorkerProgram)
	s.Engine.OnExec(workerCommand("lease-update"), LeaseUpdateProgram)
	s.Ledgers = ledger.Store{Root: s.StateRoot}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{
		Host: s.Engine.Host(), StopGrace: time.Second,
		Retry: dockerops.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsed: time.Second},
	})
	if err != nil {
		t.Fatalf("scenario: connect to the fake engine: %v", err)
	}
	t.Cleanup(func() { _ = docker.Close() })
	s.Docker = docker

	s.Repo = filepath.Join(t.TempDir(), "repo")
	if err := example.CreateRepo(ctx, s.Repo, example.RepoOptions{Dockerfile: "FROM scratch\n"}); err != nil {
		t.Fatalf("scenario: %v", err)
	}
	// The base image the repository's Dockerfile names.
	s.Engine.AddImage("scratch", nil)

	worker := filepath.Join(t.TempDir(), "forged")
	if err := os.WriteFile(worker, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatalf("scenario: %v", err)
	}
	var docker2 actors.Docker = docker
	if o.WrapDocker != nil {
		docker2 = o.WrapDocker(docker)
	}
	var git actors.Git = actors.GitHost{Runner: gitops.NewRunner(), StateRoot: s.StateRoot}
	if o.WrapGit != nil {
		git = o.WrapGit(git)
	}
	cfg := actors.AttemptConfig{
		StateRoot: s.StateRoot, WorkerBinary: worker, WorkerDigest: "sha256:fake-worker",
		Clock: s.Sys.Clock, SampleInterval: time.Second,
	}
	deps := actors.Deps{Git: git, Docker: docker2}
	s.Supervisor = s.Sys.SpawnNamed(supervisor.Props(supervisor.Config{
		Slots: o.Slots, QueueLimit: 8, Cleaner: docker, Ledgers: s.Ledgers, RunnerID: s.runnerID, Clock: s.Sys.Clock,
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, sup *actor.PID) *actor.Props {
			return actors.AttemptProps(d, subscriber, sup, cfg, deps)
		},
	}), "supervisor")
	return s
}

// Dispatch returns a dispatch of argv on the scenario's repository, its
// lease an hour from the scenario's clock.
func (s *Scenario) Dispatch(argv ...string) *messages.Dispatch {
	s.t.Helper()
	d, err := example.NewDispatch(example.DispatchOptions{RunnerID: s.runnerID, RepoPath: s.Repo, Argv: argv, Timeout: 60})
	if err != nil {
		s.t.Fatalf("scenario: %v", err)
	}
	d.Lease.ExpiresAt = s.Sys.Clock.Now().Add(time.Hour)
	return d
}

// Attempt is one submitted attempt: its dispatch and the probe receiving
// its events and outcome.
type Attempt struct {
	s        *Scenario
	Dispatch *messages.Dispatch
	Probe    *actortest.Probe
}

// Submit submits d and fails the test unless it is accepted.
func (s *Scenario) Submit(d *messages.Dispatch) *Attempt {
	s.t.Helper()
	probe := s.Sys.NewProbe()
	reply := actortest.Request[messages.SubmitReply](s.t, s.Sys, s.Supervisor, messages.SubmitAttempt{Dispatch: d, Subscriber: probe.PID()})
	if !reply.Accepted {
		s.t.Fatalf("scenario: attempt refused: %s %s", reply.Code, reply.Message)
	}
	return &Attempt{s: s, Dispatch: d, Probe: probe}
}

// Outcome waits for the attempt's outcome.
func (a *Attempt) Outcome() messages.AttemptOutcome {
	a.s.t.Helper()
	return actortest.Expect[messages.AttemptFinished](a.s.t, a.Probe, actortest.DefaultWithin).Outcome
}

// Events returns the events received so far, in order.
func (a *Attempt) Events() []messages.Event {
	var out []messages.Event
	for _, e := range actortest.All[messages.AttemptEvent](a.Probe) {
		out = append(out, e.Event)
	}
	return out
}

// EventTypes returns the types of the events received so far.
func (a *Attempt) EventTypes() []string {
	var out []string
	for _, e := range a.Events() {
		out = append(out, e.EventType)
	}
	return out
}

// Snapshot asks the supervisor for its snapshot.
func (s *Scenario) Snapshot() messages.Snapshot {
	s.t.Helper()
	return actortest.Request[messages.Snapshot](s.t, s.Sys, s.Supervisor, messages.SnapshotRequest{})
}

// Started waits for the attempt's sandbox_started event: the worker
// container exists and the attempt's time limits are armed on the clock.
func (a *Attempt) Started() {
	a.s.t.Helper()
	actortest.ExpectWhere(a.s.t, a.Probe, actortest.DefaultWithin, func(m messages.AttemptEvent) bool {
		return m.Event.EventType == "sandbox_started"
	})
}

// OutcomeAdvancing moves the clock by step until the outcome arrives (a
// chain of timers, each armed by the one before: a hard wall, then the
// worker's grace), and returns it. It fails the test if none arrives
// within DefaultWithin of real time.
func (a *Attempt) OutcomeAdvancing(step time.Duration) messages.AttemptOutcome {
	a.s.t.Helper()
	deadline := time.Now().Add(actortest.DefaultWithin)
	for time.Now().Before(deadline) {
		if got := actortest.All[messages.AttemptFinished](a.Probe); len(got) > 0 {
			return a.Outcome()
		}
		a.s.Sys.Advance(step)
		time.Sleep(time.Millisecond) // let the ticks' messages be handled before the next step
	}
	return a.Outcome() // fails with what was received
}
