package actors

import (
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

const within = 10 * time.Second

// testDispatch is a fresh dispatch whose lease expires at expires.
func testDispatch(expires time.Time) *messages.Dispatch { return actortest.NewDispatch(expires) }

type harness struct {
	redeemer CredentialRedeemer // nil: bridge_push is refused
	auth     ProviderAuth       // nil: a dispatch naming a provider is refused
	verifier ImageVerifier      // nil: no image is verified
	refs     *imagegc.Refs      // the image keys attempts hold
	state    string             // the attempts' state root
	sys      *actortest.System  // the test's actor system (dead letters, panics, leaks)
	system   *actor.ActorSystem // sys's actor system
	root     *actor.PID
	host     *fakeHost
	clk      clock.Clock
	cfg      AttemptConfig // read when an attempt is spawned: set fields before submitting
}

func newHarness(t *testing.T, host *fakeHost, clk clock.Clock) *harness {
	t.Helper()
	return newHarnessWith(t, host, clk, nil)
}

// newHarnessWith lets configure change the attempts' configuration.
func newHarnessWith(t *testing.T, host *fakeHost, clk clock.Clock, configure func(*AttemptConfig)) *harness {
	t.Helper()
	if clk == nil {
		clk = clock.System{}
	}
	var opts []actortest.Option
	if manual, ok := clk.(*clock.Manual); ok {
		opts = append(opts, actortest.WithClock(manual)) // ExpectNoMessage advances it
	}
	sys := actortest.NewSystem(t, opts...)
	h := &harness{state: t.TempDir(), sys: sys, system: sys.ActorSystem, host: host, clk: clk, refs: imagegc.NewRefs()}
	h.cfg = AttemptConfig{StateRoot: h.state, WorkerBinary: "/proc/self/exe", WorkerDigest: "d", Clock: clk, SampleInterval: 10 * time.Millisecond,
		Confinement: host.confinementFacts}
	if configure != nil {
		configure(&h.cfg)
	}
	h.root = sys.Spawn(supervisor.Props(supervisor.Config{
		Slots: 4, QueueLimit: 4, Cleaner: host, Ledgers: ledger.Store{Root: h.state},
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, sup *actor.PID) *actor.Props {
			return AttemptProps(d, subscriber, sup, h.cfg, Deps{Git: host, Docker: host, Redeemer: h.redeemer, ImageRefs: h.refs, ProviderAuth: h.auth, ImageVerifier: h.verifier})
		},
	}))
	return h
}

func (h *harness) submit(t *testing.T, d *messages.Dispatch) *actortest.Probe {
	t.Helper()
	probe := h.sys.NewProbe()
	res, err := h.system.Root.RequestFuture(h.root, messages.SubmitAttempt{Dispatch: d, Subscriber: probe.PID()}, within).Result()
	require.NoError(t, err)
	require.True(t, res.(messages.SubmitReply).Accepted, "%+v", res)
	return probe
}

// cancel cancels the attempt of d, which must be known.
func (h *harness) cancel(t *testing.T, d *messages.Dispatch) {
	t.Helper()
	reply := actortest.Request[messages.CancelReply](t, h.sys, h.root, messages.CancelAttempt{AttemptID: d.AttemptID()})
	require.True(t, reply.Found, "no attempt %s to cancel", d.AttemptID())
}

func (h *harness) run(t *testing.T, d *messages.Dispatch) messages.AttemptOutcome {
	t.Helper()
	probe := h.submit(t, d)
	return actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
}

func eventTypes(p *actortest.Probe) []string {
	var out []string
	for _, ev := range actortest.All[messages.AttemptEvent](p) {
		out = append(out, ev.Event.EventType)
	}
	return out
}

func TestAttemptHappyPath(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.lines = []string{`{"type":"runner_event","event":{"role":"agent","kind":"checkpoint","content":"hello","eventType":"task_output"}}`, "noise"}
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome

	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Equal(t, "3333333333333333333333333333333333333333", out.ResultCommitSHA)
	require.NotNil(t, out.WorkerExitCode)
	assert.Equal(t, 0, *out.WorkerExitCode)
	assert.False(t, out.Degraded)
	assert.Equal(t, 1, host.teardowns)
	assert.Equal(t, 0, host.called("build"), "a cache hit must not build")
	assert.NoError(t, host.assertErr, "the import ran while the attempt was current")
	entries, _, err := ledger.Store{Root: h.state}.List()
	require.NoError(t, err)
	assert.Empty(t, entries, "a clean teardown removes the ledger")
	types := eventTypes(probe)
	assert.Contains(t, types, "task_output")
	assert.Contains(t, types, "sandbox_output_imported")
	assert.Contains(t, types, "sandbox_teardown_completed")
	meta := actortest.All[messages.AttemptEvent](probe)
	var found bool
	for _, ev := range meta {
		if ev.Event.EventType != "sandbox_metadata" {
			continue
		}
		found = true
		var data map[string]string
		require.NoError(t, json.Unmarshal([]byte(*ev.Event.Data), &data))
		assert.Equal(t, map[string]string{"inputCommitSha": "1111111111111111111111111111111111111111", "sandboxConfigCommitSha": "2222222222222222222222222222222222222222",
			"contractDigest": data["contractDigest"], "imageDigest": "sha256:cached"}, data)
		assert.NotEmpty(t, data["contractDigest"])
	}
	assert.True(t, found, "sandbox_metadata is in the event stream")

	// The seed's data on sandbox_started, sandbox_teardown_started and
	// sandbox_cache_policy (which every attempt gets, caches or not).
	dataOf := func(eventType string) map[string]any {
		for _, ev := range meta {
			if ev.Event.EventType == eventType {
				return eventData(t, ev.Event)
			}
		}
		t.Fatalf("no %s event", eventType)
		return nil
	}
	started := dataOf("sandbox_started")
	assert.Equal(t, []any{}, started["publishedPorts"])
	volumes := started["volumes"].([]any)
	require.Len(t, volumes, 3)
	assert.Equal(t, map[string]any{"name": volumes[0].(map[string]any)["name"], "role": "workspace", "mount": "/workspace"}, volumes[0])
	lease := started["runtimeLease"].(map[string]any)
	assert.Equal(t, "active", lease["state"])
	assert.Equal(t, d.Sandbox.DispatchAttemptID, lease["dispatchAttemptId"])
	assert.Equal(t, d.Lease.WorktreeKey, lease["worktreeKey"])
	assert.NotContains(t, lease, "fencingToken", "events reach every subscriber; the token is a credential")
	assert.Equal(t, "releasing", dataOf("sandbox_teardown_started")["runtimeLease"].(map[string]any)["state"])
	policy := dataOf("sandbox_cache_policy")
	assert.Equal(t, []any{}, policy["builderManaged"])
	assert.Equal(t, []any{}, policy["perAttempt"])
}

// The attempt's three volumes are created at once: each creation waits
// here until all three are in flight, so creating them one after another
// would never finish.
func TestAttemptCreatesItsVolumesAtOnce(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.volumesTogether = &sync.WaitGroup{}
	host.volumesTogether.Add(3)
	h := newHarness(t, host, nil)
	probe := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Equal(t, 3, host.called("volume"))
}

func TestTeardownIsReachedFromEveryFailurePath(t *testing.T) {
	boom := errors.New("injected failure")
	cases := []struct {
		step  string
		err   error
		code  failure.Code
		phase string // recorded when the failure happened, not re-derived
	}{
		{"prepare", failure.New(failure.SandboxInputFailed, "no input ref"), failure.SandboxInputFailed, messages.PhasePreparing},
		{"lookup", boom, failure.SandboxBuildFailed, messages.PhaseBuilding},
		{"build", boom, failure.SandboxBuildFailed, messages.PhaseBuilding},
		{"volume", boom, failure.SandboxCreateFailed, messages.PhaseProvisioning},
		{"create", boom, failure.SandboxCreateFailed, messages.PhaseRunning},
		{"copyin", boom, failure.SandboxCreateFailed, messages.PhaseRunning},
		{"run", boom, failure.SandboxRuntimeFailed, messages.PhaseRunning},
		{"inspect", boom, failure.SandboxRuntimeFailed, messages.PhaseRunning},
		{"copyout", boom, failure.SandboxRuntimeFailed, messages.PhaseCollecting},
		{"validate", failure.New(failure.SandboxOutputInvalid, "manifest identity or fence mismatch"), failure.SandboxOutputInvalid, messages.PhaseCollecting},
		{"import", failure.New(failure.SandboxOutputConflict, "branch moved"), failure.SandboxOutputConflict, messages.PhaseImporting},
	}
	for _, c := range cases {
		t.Run(c.step, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			host.imageFound = c.step != "build"
			host.fail[c.step] = c.err
			h := newHarness(t, host, nil)
			probe := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
			out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(c.code), out.Code, out.Message)
			assert.Equal(t, c.phase, out.Phase)
			failed := actortest.All[messages.AttemptEvent](probe)
			require.NotEmpty(t, failed)
			last := failed[len(failed)-1].Event
			assert.Equal(t, string(c.code), last.EventType)
			assert.Equal(t, messages.KindError, last.Kind, "a failure event is an error whatever its name")
			assert.Equal(t, 1, host.teardowns, "teardown runs exactly once")
			assert.Equal(t, 0, host.called("import")-boolInt(c.step == "import"), "nothing is imported after a failure")
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestFailedTeardownMarksTheAttemptDegraded(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.fail["teardown"] = failure.New(failure.SandboxTeardownFailed, "a volume remained")
	h := newHarness(t, host, nil)
	probe := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.True(t, out.Degraded)
	assert.Contains(t, eventTypes(probe), "teardown_failed")
	entries, corrupt, err := ledger.Store{Root: h.state}.List()
	require.NoError(t, err)
	assert.Empty(t, corrupt)
	require.Len(t, entries, 1, "the ledger is kept for the reaper")
	assert.Equal(t, ledger.Degraded, entries[0].State)
	// No services or egress: no attempt network is planned nor created, and
	// the worker runs with network none.
	var planned, created []string
	for _, r := range entries[0].Planned {
		planned = append(planned, r.Type+":"+r.Role)
	}
	for _, r := range entries[0].Created {
		created = append(created, r.Type+":"+r.Role)
	}
	want := []string{"container:agent", "volume:workspace", "volume:control", "volume:secrets"}
	assert.ElementsMatch(t, want, planned)
	assert.ElementsMatch(t, want, created)
	require.Len(t, host.specs, 1)
	assert.Empty(t, host.specs[0].Network, "network none")
	// The seed's snapshot: the reservation, the sandbox's paths and the
	// exact labels every object of the attempt carries.
	res := testDispatch(time.Now()).Sandbox.RequestedResources
	assert.Equal(t, &ledger.Reservation{MemoryBytes: res.WorkerMemoryLimitBytes + res.ServiceMemoryLimitBytes + res.RuntimeOverheadBytes,
		CPUMillis: res.CPUMillis, PIDs: res.PIDs}, entries[0].Reservation)
	assert.Contains(t, entries[0].Paths, ledger.Path{Path: messages.WorkspaceDir, Role: "worktree"})
	assert.Contains(t, entries[0].Paths, ledger.Path{Path: messages.TempDir, Role: "temporary"})
	assert.Equal(t, host.specs[0].Labels, entries[0].Labels, "the ledger keeps the labels the worker was created with")
	assert.Equal(t, "true", entries[0].Labels["dev.forge.managed"])
	require.Eventually(t, func() bool {
		res, err := h.system.Root.RequestFuture(h.root, messages.SnapshotRequest{}, within).Result()
		return err == nil && res.(messages.Snapshot).Degraded == 1
	}, within, 10*time.Millisecond)
}

func TestRefusedBeforeAnythingIsCreated(t *testing.T) {
	t.Run("services without a catalogue", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.contract = "version: 1\nservices:\n  - type: postgres\n"
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 1 << 30
		h := newHarness(t, host, nil)
		out := h.run(t, d)
		assert.Equal(t, string(failure.SandboxServiceUnavailable), out.Code)
		assert.Zero(t, host.called("lookup")+host.called("network")+host.called("volume")+host.called("create"))
	})
	t.Run("egress", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: []string{"example.com"}}
		out := newHarness(t, host, nil).run(t, d)
		assert.Equal(t, string(failure.SandboxEgressUnsupported), out.Code)
		assert.Zero(t, host.called("prepare")+host.called("volume"))
	})
	t.Run("services without network isolation", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.noIsolation = true
		host.contract = "version: 1\nservices:\n  - type: postgres\n"
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxNetworkIsolation), out.Code)
		assert.Zero(t, host.called("lookup")+host.called("volume")+host.called("create"))
	})
	t.Run("egress without network isolation", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.noIsolation = true
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: []string{"example.com"}}
		out := newHarness(t, host, nil).run(t, d)
		assert.Equal(t, string(failure.SandboxNetworkIsolation), out.Code)
		assert.Zero(t, host.called("prepare")+host.called("volume"))
	})
	t.Run("no network needed, no isolation", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.noIsolation = true
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, messages.StatusSucceeded, out.Status, "network none needs no isolated network: %s", out.Message)
	})
	t.Run("a cache mode the runner policy forbids", func(t *testing.T) {
		for _, tc := range []struct{ modes, contract string }{
			{"readonly", "  - {name: npm, mode: per_attempt}\n"},
			{"per_attempt", "  - {name: npm, mode: per_attempt}\n  - {name: pip, mode: readonly}\n"},
			{"none", "  - {name: cargo, mode: readonly}\n"},
		} {
			host := newFakeHost(t.TempDir())
			host.contract = "version: 1\nworkingDirectory: /workspace\ncaches:\n" + tc.contract
			policy, err := caches.ParseModes(tc.modes)
			require.NoError(t, err)
			out := newHarnessWith(t, host, nil, func(c *AttemptConfig) { c.Caches = policy }).run(t, testDispatch(time.Now().Add(time.Hour)))
			assert.Equal(t, string(failure.SandboxCachesUnsupported), out.Code, "%s: refused, never accepted and ignored", tc.modes)
			assert.Contains(t, out.Message, "allows cache modes: "+tc.modes)
			assert.Equal(t, messages.PhasePreparing, out.Phase)
			assert.Zero(t, host.called("lookup")+host.called("volume"))
		}
	})
	t.Run("invalid contract", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.contract = "version: 1\nworkingDirectory: /etc\n"
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxContractInvalid), out.Code)
		assert.Zero(t, host.called("volume"))
	})
	t.Run("sandbox_required without security profiles", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
		out := newHarness(t, host, nil).run(t, d)
		assert.Equal(t, string(failure.SandboxSecurityUnavailable), out.Code)
		assert.Zero(t, host.called("volume"))
	})
}

func TestTrustedHostFailureClassification(t *testing.T) {
	t.Run("oom from inspected state, not from exit code", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 137
		host.state = dockerops.ContainerState{OOMKilled: true, ExitCode: 137}
		d := testDispatch(time.Now().Add(time.Hour))
		out := newHarness(t, host, nil).run(t, d)
		assert.Equal(t, messages.StatusFailed, out.Status)
		assert.Equal(t, string(failure.SandboxOOMKilled), out.Code)
		assert.Equal(t, messages.PhaseRunning, out.Phase)
		assert.Equal(t, 1, host.called("import"), "a trusted failure's valid output is imported")
		assert.Equal(t, "3333333333333333333333333333333333333333", out.ResultCommitSHA, "the outcome says both")
		assert.Contains(t, out.Message, "imported as 3333333333333333333333333333333333333333 on forge/t")
		require.Len(t, out.Causes, 1)
		assert.Equal(t, string(failure.SandboxChildResultUnknown), out.Causes[0].Code)
		assert.Equal(t, "sandbox", out.Causes[0].Source)
	})
	t.Run("oom with invalid output is not imported", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 137
		host.missing = true
		host.state = dockerops.ContainerState{OOMKilled: true, ExitCode: 137}
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxOOMKilled), out.Code)
		assert.Contains(t, out.Message, "its output was not imported")
		assert.Zero(t, host.called("import"))
		assert.Empty(t, out.ResultCommitSHA)
	})
	t.Run("a trusted failure's result is never published", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 137
		host.state = dockerops.ContainerState{OOMKilled: true, ExitCode: 137}
		h := newHarness(t, host, nil)
		h.redeemer = host
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.PublicationMode = messages.PublicationBridgePush
		d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
		out := h.run(t, d)
		assert.Equal(t, string(failure.SandboxOOMKilled), out.Code)
		assert.Empty(t, out.PublishedCommitSHA)
		assert.Zero(t, host.called("publish"))
	})
	t.Run("exit 137 alone is not an OOM", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 137
		host.missing = true
		host.state = dockerops.ContainerState{ExitCode: 137}
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code)
		assert.Contains(t, out.Message, "137")
	})
	t.Run("non-zero exit with output is imported but failed", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		host.exitCode = 1
		out := newHarness(t, host, nil).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code)
		assert.Equal(t, 1, host.called("import"))
	})
}

func TestCancellationMidRunTearsDown(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	res, err := h.system.Root.RequestFuture(h.root, messages.CancelAttempt{AttemptID: d.AttemptID(), Reason: "operator"}, within).Result()
	require.NoError(t, err)
	require.True(t, res.(messages.CancelReply).Found)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.StatusCancelled, out.Status)
	assert.Equal(t, string(failure.SandboxCancelled), out.Code)
	assert.Equal(t, 1, host.teardowns)
	assert.Zero(t, host.called("import"))
}

// TestCancelWithACodeEndsAsThatFailure: a cancel carrying a code (the
// fleet stopping an attempt it declared lost) ends the attempt failed with
// that code, not cancelled, with teardown and no import.
func TestCancelWithACodeEndsAsThatFailure(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	res, err := h.system.Root.RequestFuture(h.root, messages.CancelAttempt{AttemptID: d.AttemptID(), Reason: "declared lost", Code: failure.SandboxRunnerLost}, within).Result()
	require.NoError(t, err)
	require.True(t, res.(messages.CancelReply).Found)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxRunnerLost), out.Code)
	assert.Contains(t, out.Message, "declared lost")
	assert.Equal(t, 1, host.teardowns)
	assert.Zero(t, host.called("import"))
}

func TestLeaseExpiryAbortsTheAttempt(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	// The fake worker is silent: no idle limit within the test's hour.
	h := newHarnessWith(t, host, clk, func(c *AttemptConfig) { c.Limits = timelimit.Limits{HardWall: 8 * time.Hour, Idle: 8 * time.Hour} })
	d := testDispatch(clk.Now().Add(time.Hour))
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	actortest.ExpectNoMessage[messages.AttemptFinished](t, probe, 59*time.Minute)
	clk.Advance(time.Minute)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxLeaseExpired), out.Code)
	assert.Equal(t, 1, host.teardowns)
}

func TestBuildMissTakesThePermitAndSharesTheImage(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.imageFound = false
	h := newHarness(t, host, nil)
	first := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	second := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	for _, p := range []*actortest.Probe{first, second} {
		out := actortest.Expect[messages.AttemptFinished](t, p, within).Outcome
		assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	}
	assert.Equal(t, 2, host.called("build"), "one build of two stages (project, agent) for both attempts")
	res, err := h.system.Root.RequestFuture(h.root, messages.SnapshotRequest{}, within).Result()
	require.NoError(t, err)
	assert.Zero(t, res.(messages.Snapshot).BuildQueue)
}

func TestStaleFenceAtImportMovesNothing(t *testing.T) {
	f := newFence(clock.System{}, "token-a", time.Now().Add(time.Hour))
	require.NoError(t, f.assertCurrent("token-a"))
	assert.Equal(t, failure.SandboxOutputStale, failure.CodeOf(f.assertCurrent("token-b")))
	expired := newFence(clock.System{}, "token-a", time.Now().Add(-time.Second))
	assert.Equal(t, failure.SandboxOutputStale, failure.CodeOf(expired.assertCurrent("token-a")))
	f.cancel()
	assert.Equal(t, failure.SandboxOutputStale, failure.CodeOf(f.assertCurrent("token-a")))
}

func TestEveryActorAnswersInspect(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := newHarness(t, host, nil)
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	<-host.runEntered
	kinds := map[string]string{}
	queue := []*actor.PID{h.root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		res, err := h.system.Root.RequestFuture(pid, messages.Inspect{}, within).Result()
		require.NoError(t, err, pid.GetId())
		reply := res.(messages.InspectReply)
		kinds[reply.Kind] = reply.Phase
		for _, child := range reply.Children {
			queue = append(queue, actor.NewPID(h.system.Address(), child))
		}
	}
	assert.Equal(t, messages.PhaseRunning, kinds["attempt"])
	for _, kind := range []string{"supervisor", "attempt", kindWatchdog, kindWorker} {
		assert.Contains(t, kinds, kind)
	}
	h.cancel(t, d)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
}

// The attempt removes its private work directory off its mailbox: while
// the removal runs, the attempt still answers (issue 25).
func TestWorkDirRemovalLeavesTheMailboxFree(t *testing.T) {
	host := newFakeHost(t.TempDir())
	removing, removed := make(chan string, 1), make(chan struct{})
	h := newHarnessWith(t, host, nil, func(c *AttemptConfig) {
		c.removeAll = func(dir string) error {
			removing <- dir
			<-removed
			return os.RemoveAll(dir)
		}
	})
	d := testDispatch(time.Now().Add(time.Hour))
	probe := h.submit(t, d)
	var dir string
	select {
	case dir = <-removing:
	case <-time.After(within):
		t.Fatal("the work directory was never removed")
	}
	assert.DirExists(t, dir)
	root := actortest.Request[messages.InspectReply](t, h.sys, h.root, messages.Inspect{})
	require.Len(t, root.Children, 1)
	attempt := actor.NewPID(h.system.Address(), root.Children[0])
	res, err := h.system.Root.RequestFuture(attempt, messages.Inspect{}, within).Result()
	close(removed)
	require.NoError(t, err, "the attempt answers while its work directory is removed")
	assert.Equal(t, kindAttempt, res.(messages.InspectReply).Kind)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.NoDirExists(t, dir)
}
