package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// These tests run whole attempts on the real Docker engine: the static
// forged binary is the worker, the base image is built locally from
// busybox-static, and every test asserts that nothing labelled for its
// attempt remains.

const attemptTimeout = 4 * time.Minute

type e2e struct {
	t         *testing.T
	engine    *client.Client
	runner    *runner.Runner
	repo      string
	stateRoot string
}

func newE2E(t *testing.T, cfg runner.Config) *e2e {
	t.Helper()
	engine := enginetest.Client(t)
	cfg.WorkerBinary = workerbin.Path(t)
	if cfg.StateRoot == "" {
		cfg.StateRoot = t.TempDir()
	}
	if cfg.LockRoot == "" {
		cfg.LockRoot = t.TempDir()
	}
	cfg.AllowRootful = true // the test engine runs rootful
	if cfg.RuntimeProber == nil {
		cfg.RuntimeProber = sharedProbes
	}
	reserve := cfg.Capacity.HostReserveBytes
	cfg.Capacity = example.SmallHostCapacity()
	if reserve > 0 {
		cfg.Capacity.HostReserveBytes = reserve
	}
	if cfg.Slots == 0 {
		cfg.Slots = 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	_, err = example.BuildBaseImage(ctx, r.Docker(), "/bin/busybox")
	require.NoError(t, err)
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))
	return &e2e{t: t, engine: engine, runner: r, repo: repo, stateRoot: cfg.StateRoot}
}

func (e *e2e) dispatch(argv []string, memory int64) *messages.Dispatch {
	e.t.Helper()
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: e.runner.RunnerID(), RepoPath: e.repo, Argv: argv, MemoryBytes: memory, Timeout: 120})
	require.NoError(e.t, err)
	return d
}

func (e *e2e) submit(d *messages.Dispatch) *runner.Log {
	e.t.Helper()
	reply, err := e.runner.Submit(d)
	require.NoError(e.t, err)
	require.True(e.t, reply.Accepted, "%+v", reply)
	e.t.Cleanup(func() { enginetest.AssertNoneLabelled(e.t, e.engine, d.AttemptID()) })
	log, ok := e.runner.Logs().Get(d.AttemptID())
	require.True(e.t, ok)
	return log
}

func (e *e2e) wait(log *runner.Log) messages.AttemptOutcome {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	out, err := log.Wait(ctx)
	require.NoError(e.t, err, "attempt did not finish; events: %v", eventSummary(log))
	return out
}

func (e *e2e) git(args ...string) string {
	e.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", e.repo}, args...)...).CombinedOutput()
	require.NoError(e.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func (e *e2e) branchExists(branch string) bool {
	return exec.Command("git", "-C", e.repo, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil
}

func eventSummary(log *runner.Log) []string {
	var out []string
	for _, ev := range log.Events() {
		out = append(out, ev.EventType+": "+ev.Content)
	}
	return out
}

// waitForEvent waits until the attempt emitted an event of the given type.
func waitForEvent(t testing.TB, log *runner.Log, eventType string) messages.Event {
	t.Helper()
	deadline := time.After(attemptTimeout)
	next := 0
	for {
		events, outcome, end, changed := log.Read(next)
		for _, ev := range events {
			if ev.EventType == eventType {
				return ev
			}
		}
		if outcome != nil {
			t.Fatalf("attempt finished (%s %s) before %s; events: %v", outcome.Status, outcome.Code, eventType, eventSummary(log))
		}
		next = end
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s event; events: %v", eventType, eventSummary(log))
		}
	}
}

func TestEndToEndResultLandsOnTheManagedBranch(t *testing.T) {
	e := newE2E(t, runner.Config{})
	d := e.dispatch(nil, 0)
	out := e.wait(e.submit(d))

	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	require.NotEmpty(t, out.ResultCommitSHA)
	assert.Equal(t, out.ResultCommitSHA, e.git("rev-parse", "refs/heads/"+example.Branch))
	assert.Equal(t, e.git("rev-parse", "main"), e.git("rev-parse", example.Branch+"^"), "the result's parent is the input commit")
	assert.Equal(t, "hello from the sandbox", e.git("show", example.Branch+":hello.txt"))
	assert.Empty(t, e.git("status", "--porcelain"), "the host worktree is untouched")
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
	assert.False(t, out.Degraded)
	assert.NotZero(t, out.PeakMemoryBytes)
}

func TestEndToEndWorkerNonZeroExit(t *testing.T) {
	e := newE2E(t, runner.Config{})
	d := e.dispatch([]string{"/bin/sh", "-c", "echo 'compiler said no' >&2; exit 3"}, 0)
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code)
	assert.Contains(t, out.Message, "3", "the diagnostic names the task's exit code")
	assert.False(t, e.branchExists(example.Branch), "an unchanged tree moves no branch")
}

func TestEndToEndOOMIsClassifiedFromInspectedState(t *testing.T) {
	e := newE2E(t, runner.Config{})
	// The shell holds ~300 MB in a variable: far past the 96 MiB limit.
	d := e.dispatch([]string{"/bin/sh", "-c", "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo ${#x}"}, 96<<20)
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOOMKilled), out.Code, out.Message)
	assert.False(t, e.branchExists(example.Branch))
}

// TestEndToEndCancellationMidRun runs under runc and gVisor: the release
// by signal stops the worker either way.
func TestEndToEndCancellationMidRun(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { cancellationMidRun(t, iso.floor) })
	}
}

func cancellationMidRun(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	d := e.dispatch([]string{"/bin/sh", "-c", "echo started; sleep 300"}, 0)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	found, err := e.runner.Cancel(d.AttemptID(), "test cancels mid-run")
	require.NoError(t, err)
	require.True(t, found)
	out := e.wait(log)
	assert.Equal(t, messages.StatusCancelled, out.Status)
	assert.Equal(t, string(failure.SandboxCancelled), out.Code)
	assert.False(t, e.branchExists(example.Branch))
}

// tamperingDocker rewrites the worker's manifest after it is copied out,
// as a compromised sandbox could; tamperingVolumes does so when the output
// is read from the control volume's image instead.
type tamperingDocker struct {
	actors.Docker
}

func (d tamperingDocker) CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error {
	if err := d.Docker.CopyDirOut(ctx, containerID, srcDir, hostDir, maxBytes, maxFiles); err != nil {
		return err
	}
	return tamperManifest(hostDir)
}

type tamperingVolumes struct {
	actors.VolumeStore
}

func (v tamperingVolumes) CopyDirOut(ctx context.Context, volume, dir, hostDir string, maxBytes int64, maxFiles int) (bool, error) {
	copied, err := v.VolumeStore.CopyDirOut(ctx, volume, dir, hostDir, maxBytes, maxFiles)
	if !copied || err != nil {
		return copied, err
	}
	return true, tamperManifest(hostDir)
}

func tamperManifest(hostDir string) error {
	path := filepath.Join(hostDir, messages.ManifestFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var manifest map[string]any
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return err
	}
	manifest["fencingToken"] = example.NewUUID()
	raw, err = json.Marshal(manifest)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

// TestEndToEndManifestTamperingIsRefused runs under runc and gVisor.
func TestEndToEndManifestTamperingIsRefused(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, runner.Config{Isolation: iso.floor, WrapDocker: func(d actors.Docker) actors.Docker { return tamperingDocker{d} },
				WrapVolumes: func(v actors.VolumeStore) actors.VolumeStore { return tamperingVolumes{v} }})
			d := e.dispatch(nil, 0)
			out := e.wait(e.submit(d))
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
			assert.False(t, e.branchExists(example.Branch), "nothing is imported from a tampered manifest")
		})
	}
}

// TestEndToEndWorkerContainerIsHardened runs under runc and gVisor: the
// same hardening, under gVisor with the runsc runtime and the translated
// pids limit.
func TestEndToEndWorkerContainerIsHardened(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); workerHardened(t, iso.floor) })
	}
}

func workerHardened(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	d := e.dispatch([]string{"/bin/sh", "-c", "sleep 300"}, 256<<20)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := e.engine.ContainerInspect(ctx, names.Container)
	require.NoError(t, err)
	host := info.HostConfig
	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Contains(t, host.SecurityOpt, "no-new-privileges")
	require.NotNil(t, host.PidsLimit)
	if floor == messages.IsolationGVisor {
		assert.Equal(t, "runsc", host.Runtime)
		assert.Equal(t, dockerops.GVisorPIDsLimit(example.DefaultPIDs), *host.PidsLimit)
	} else {
		engineInfo, err := e.engine.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, engineInfo.DefaultRuntime, host.Runtime, "the engine's default runtime")
		assert.Equal(t, int64(example.DefaultPIDs), *host.PidsLimit)
	}
	assert.Equal(t, int64(256<<20), host.Memory)
	assert.Equal(t, host.Memory, host.MemorySwap)
	first := messages.SandboxUser{UID: supervisor.DefaultUIDBase, GID: supervisor.DefaultUIDBase}
	assert.Equal(t, first.String(), info.Config.User, "the first slot's sandbox user")
	require.NotNil(t, host.Init)
	assert.True(t, *host.Init)
	assert.Equal(t, "none", host.LogConfig.Type)
	// No services or egress: loopback only, and no attempt network exists.
	// Under runc the engine makes no network sandbox for it (the agent
	// image carries the engine's /etc files: dockerops.SandboxEtcLabel),
	// and runc gives it a namespace of its own with the loopback up
	// (dockerops' TestIntegrationNetworkNoneIsLoopbackOnly).
	assert.Equal(t, "none", string(host.NetworkMode))
	assert.Equal(t, []string{dockerops.SandboxNameserver}, host.DNS)
	var networks []string
	for name := range info.NetworkSettings.Networks {
		networks = append(networks, name)
	}
	if floor == messages.IsolationGVisor {
		assert.False(t, info.Config.NetworkDisabled)
		assert.Equal(t, []string{"none"}, networks)
	} else {
		assert.True(t, info.Config.NetworkDisabled)
		assert.Empty(t, networks)
	}
	attemptNetworks, err := e.engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", dockerops.LabelAttemptID+"="+d.AttemptID()))})
	require.NoError(t, err)
	assert.Empty(t, attemptNetworks, "no attempt network is created")
	_, err = e.engine.NetworkInspect(ctx, names.Network, network.InspectOptions{})
	assert.True(t, cerrdefs.IsNotFound(err), "%v", err)

	_, err = e.runner.Cancel(d.AttemptID(), "hardening inspected")
	require.NoError(t, err)
	assert.Equal(t, messages.StatusCancelled, e.wait(log).Status)
}

// TestEndToEndLeaseExpiryStopsTheWorkerAndLeavesNothing runs under runc
// and gVisor: the lease watchdog stops the worker container either way.
func TestEndToEndLeaseExpiryStopsTheWorkerAndLeavesNothing(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { leaseExpiry(t, iso.floor) })
	}
}

func leaseExpiry(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: e.runner.RunnerID(), RepoPath: e.repo, Argv: []string{"/bin/sh", "-c", "sleep 120"}, Lease: 20 * time.Second})
	require.NoError(t, err)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	out := e.wait(log)
	assert.Equal(t, string(failure.SandboxLeaseExpired), out.Code, out.Message)
	assert.Less(t, time.Since(d.Lease.ExpiresAt), 30*time.Second, "the attempt ended soon after its lease")
	assert.False(t, e.branchExists(example.Branch))
}

func TestEndToEndRenewalKeepsTheAttemptAlivePastItsFirstExpiry(t *testing.T) {
	e := newE2E(t, runner.Config{})
	d, err := example.NewDispatch(example.DispatchOptions{
		// The lease leaves room for a slow image build before the task
		// starts; the task then runs past it.
		Project: testProject, RunnerID: e.runner.RunnerID(), RepoPath: e.repo, Lease: 25 * time.Second,
		Argv: []string{"/bin/sh", "-c", "sleep 28; echo outlived the first lease > renewed.txt"},
	})
	require.NoError(t, err)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	reply, err := e.runner.Renew(d.AttemptID(), d.Lease.FencingToken, time.Now().Add(2*time.Minute))
	require.NoError(t, err)
	require.True(t, reply.Accepted, "%+v", reply)
	waitForEvent(t, log, "sandbox_lease_renewed")
	require.Eventually(t, func() bool {
		entry, err := ledger.Store{Root: e.stateRoot}.Read(d.AttemptID())
		return err == nil && entry.ExpiresAt.After(d.Lease.ExpiresAt.Add(time.Minute))
	}, 10*time.Second, 10*time.Millisecond, "the renewal is visible in the running attempt's ledger")
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.True(t, time.Now().After(d.Lease.ExpiresAt), "the attempt outlived its first lease")
	assert.Equal(t, "outlived the first lease", e.git("show", example.Branch+":renewed.txt"))
	for _, ev := range log.Events() {
		assert.NotEqual(t, "sandbox_lease_push_failed", ev.EventType, ev.Content)
	}
}

// TestTwoRunnersOnOneEngineNeverTouchEachOther runs an attempt on runner A
// while runner B (another runner id, state root and context lock, as on a
// shared engine) reaps with no grace period: B removes nothing of A's.
func TestTwoRunnersOnOneEngineNeverTouchEachOther(t *testing.T) {
	a := newE2E(t, runner.Config{})
	b := newE2E(t, runner.Config{ReapGrace: reaper.NoGrace})
	require.NotEqual(t, a.runner.RunnerID(), b.runner.RunnerID())

	d := a.dispatch([]string{"/bin/sh", "-c", "sleep 12; echo survived > shared.txt"}, 0)
	log := a.submit(d)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)

	round, err := b.runner.Reap(false, nil)
	require.NoError(t, err)
	for _, obj := range round.Removed {
		assert.NotEqual(t, d.AttemptID(), obj.Labels["dev.forge.dispatch-attempt-id"], "B removed A's %s %s", obj.Kind, obj.Name)
	}
	info, err := a.engine.ContainerInspect(context.Background(), names.Container)
	require.NoError(t, err, "A's worker still exists")
	assert.True(t, info.State.Running)

	out := a.wait(log)
	assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Equal(t, "survived", a.git("show", example.Branch+":shared.txt"))
}

// localRedeemer issues a credential for a local bare repository, standing
// in for the server's grant API.
type localRedeemer struct{ remote string }

func (l localRedeemer) Redeem(_ context.Context, req messages.PublicationRequest) (gitops.Credential, error) {
	if req.GrantID == "" || req.ResultCommitSHA == "" {
		return gitops.Credential{}, fmt.Errorf("incomplete publication request %+v", req)
	}
	return gitops.Credential{RemoteURL: l.remote, Username: "x-access-token", Secret: "local-secret", ExpiresAt: time.Now().Add(time.Minute)}, nil
}

func TestEndToEndBridgePushPublishesTheResult(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	require.NoError(t, exec.Command("git", "init", "-q", "--bare", remote).Run())
	e := newE2E(t, runner.Config{
		Redeemer:       localRedeemer{remote: remote},
		ValidateRemote: func(url string) error { return nil }, // a local bare repository stands in for GitHub
	})
	d := e.dispatch(nil, 0)
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
	out := e.wait(e.submit(d))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	assert.Equal(t, out.ResultCommitSHA, out.PublishedCommitSHA)
	published, err := exec.Command("git", "-C", remote, "rev-parse", "refs/heads/"+example.Branch).Output()
	require.NoError(t, err)
	assert.Equal(t, out.ResultCommitSHA, strings.TrimSpace(string(published)))
}

// A task that writes a CI workflow under bridge_push: the result is
// imported (the managed branch is the operator's own), but the default
// publish policy refuses to push it, and the remote stays untouched.
func TestEndToEndBridgePushRefusesAWorkflowResult(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	require.NoError(t, exec.Command("git", "init", "-q", "--bare", remote).Run())
	e := newE2E(t, runner.Config{
		Redeemer:       localRedeemer{remote: remote},
		ValidateRemote: func(url string) error { return nil }, // a local bare repository stands in for GitHub
	})
	d := e.dispatch([]string{"/bin/sh", "-c", "mkdir -p .github/workflows && printf 'on: push\\njobs: {}\\n' > .github/workflows/x.yml"}, 0)
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputPublishPolicy), out.Code, out.Message)
	assert.Contains(t, out.Message, ".github/workflows/x.yml")
	assert.Empty(t, out.PublishedCommitSHA)
	refs, err := exec.Command("git", "-C", remote, "for-each-ref").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(refs)), "the remote is untouched")
}

// A hostile task looks for the attempt's fencing token (a credential of
// the lease renewal and of the publication grant) in its environment and
// in every environment it can read under /proc, and commits what it
// found: the token is nowhere. It runs under runc and gVisor, where the
// task can read the worker's environment too (docs/gvisor.md).
func TestEndToEndTheTaskCannotReadTheFencingToken(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); fencingTokenHidden(t, iso.floor) })
	}
}

func fencingTokenHidden(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	d := e.dispatch([]string{"/bin/sh", "-c",
		`env > found.txt; for f in /proc/[0-9]*/environ; do tr '\000' '\n' < "$f" >> found.txt 2>/dev/null; done; true`}, 0)
	out := e.wait(e.submit(d))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	found := e.git("show", out.ResultCommitSHA+":found.txt")
	assert.Contains(t, found, "FORGE_DISPATCH_ATTEMPT_ID="+d.Sandbox.DispatchAttemptID, "the probe read the environment")
	assert.NotContains(t, found, d.Lease.FencingToken)
	assert.NotContains(t, found, "FORGE_FENCING_TOKEN")
}
