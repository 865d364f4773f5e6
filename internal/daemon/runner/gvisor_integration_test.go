package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// These tests run under the gvisor isolation floor on the real engine,
// which must have gVisor's runsc registered as "runsc"
// (scripts/ensure-runsc.sh); they fail, never skip, without it.

// TestGVisorEndToEndExampleRunsUnderRunsc runs the example attempt (no
// services, network none) under the floor: the worker container's runtime
// is runsc, the task sees gVisor's kernel, and the result lands.
func TestGVisorEndToEndExampleRunsUnderRunsc(t *testing.T) {
	e := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor})
	report := e.runner.Preflight(context.Background())
	require.True(t, report.Isolation.GVisor.Works, "runsc does not work (run scripts/ensure-runsc.sh): %s", report.Isolation.GVisor.Reason)
	require.True(t, report.Available, "%s: %s", report.Code, report.Reason)

	// The task writes the example's file and the kernel's first log line:
	// gVisor's banner under runsc, the host's log (unreadable) under runc.
	d := e.dispatch([]string{"/bin/sh", "-c", "printf 'hello from the sandbox' > hello.txt; (dmesg 2>&1 | head -1) > kernel.txt; sleep 5"}, 256<<20)
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := e.engine.ContainerInspect(ctx, names.Container) // the task sleeps 5 s after its start
	require.NoError(t, err)
	assert.Equal(t, "runsc", info.HostConfig.Runtime)
	assert.Equal(t, "none", string(info.HostConfig.NetworkMode))
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.Equal(t, "hello from the sandbox", e.git("show", example.Branch+":hello.txt"))
	assert.Contains(t, e.git("show", example.Branch+":kernel.txt"), "Starting gVisor", "the task ran on gVisor's kernel")
	assert.Equal(t, messages.IsolationGVisor, out.Isolation)
	assert.Equal(t, "runsc", out.WorkerRuntime)
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
}

// TestGVisorEndToEndRefusesWhatNeedsANetwork: under the floor open_public
// is refused with the registered code before anything is created (the
// submit's cleanup asserts nothing labelled for the attempt remains); with
// a network runtime the engine lacks, so are public_allowlist and a
// contract declaring services, while the host stays available.
func TestGVisorEndToEndRefusesWhatNeedsANetwork(t *testing.T) {
	e := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor, AllowOpenPublic: true, GVisorNetworkRuntime: "forged-test-runtime-not-registered"})
	report := e.runner.Preflight(context.Background())
	require.True(t, report.Available, "%s: %s", report.Code, report.Reason)
	assert.False(t, report.Isolation.GVisorNetwork.Registered)
	for _, mode := range []string{messages.NetworkPublicAllowlist, messages.NetworkOpenPublic} {
		d := e.dispatch(nil, 0)
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: mode}
		if mode == messages.NetworkPublicAllowlist {
			d.Sandbox.NetworkPolicy.AllowedHosts = []string{"example.com"}
		}
		out := e.wait(e.submit(d))
		assert.Equal(t, messages.StatusFailed, out.Status, mode)
		assert.Equal(t, string(failure.SandboxIsolationNetworkUnsupport), out.Code, "%s: %s", mode, out.Message)
		assert.Equal(t, messages.IsolationGVisor, out.Isolation, "refused after the isolation decision")
		assert.Empty(t, out.WorkerRuntime, "no worker was created")
	}

	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "forge.sandbox.yml"), []byte(servicesContract), 0o644))
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-am", "services")
	d := e.dispatch(nil, 0)
	d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = serviceMemory
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxIsolationNetworkUnsupport), out.Code, out.Message)
	assert.Contains(t, out.Message, "forged-test-runtime-not-registered", "the refusal names the runtime")
	assert.False(t, e.branchExists(example.Branch))

	// With the engine's runsc-net (scripts/ensure-runsc.sh), open_public
	// is still refused: its netns guard does not hold under netstack.
	g := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor, AllowOpenPublic: true})
	require.True(t, g.runner.Preflight(context.Background()).Isolation.GVisorNetwork.Works)
	od := g.dispatch(nil, 0)
	od.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
	out = g.wait(g.submit(od))
	assert.Equal(t, string(failure.SandboxIsolationNetworkUnsupport), out.Code, out.Message)
}

// TestGVisorEndToEndHostWithoutTheRuntimeIsUnavailable: a floor whose
// runtime the engine does not register makes the host unavailable with
// the registered code, and a dispatch is not admitted.
func TestGVisorEndToEndHostWithoutTheRuntimeIsUnavailable(t *testing.T) {
	e := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor, GVisorRuntime: "forged-test-runtime-not-registered"})
	report := e.runner.Preflight(context.Background())
	assert.False(t, report.Available)
	assert.Equal(t, failure.SandboxIsolationUnavailable, report.Code, report.Reason)
	assert.False(t, report.Isolation.GVisor.Registered)
	reply, err := e.runner.Submit(e.dispatch(nil, 0))
	require.NoError(t, err)
	assert.False(t, reply.Accepted, "%+v", reply)
	assert.Equal(t, string(failure.SandboxIsolationUnavailable), reply.Code, "%+v", reply)
}

// TestGVisorEndToEndDispatchAsksForGVisorOnARuncFloor: on a runc-floor
// runner that offers gVisor (--allow-gvisor-dispatch), preflight probes
// runsc and the host stays a runc host; a dispatch asking for gVisor
// (sandbox.isolation gvisor) runs its worker under runsc, on gVisor's
// kernel. Where runsc is not registered, such a dispatch is refused with
// sandbox_isolation_unavailable before anything is created, and the host
// stays available. A dispatch asking nothing, run beside it, runs under
// runc; each attempt's ledger and outcome record its isolation.
func TestGVisorEndToEndDispatchAsksForGVisorOnARuncFloor(t *testing.T) {
	e := newE2E(t, runner.Config{Isolation: messages.IsolationRunc, AllowGVisorDispatch: true})
	report := e.runner.Preflight(context.Background())
	require.True(t, report.Available, "%s: %s", report.Code, report.Reason)
	assert.Equal(t, messages.IsolationRunc, report.Isolation.Floor)
	require.True(t, report.Isolation.GVisor.Works, "runsc does not work (run scripts/ensure-runsc.sh): %s", report.Isolation.GVisor.Reason)

	d := e.dispatch([]string{"/bin/sh", "-c", "(dmesg 2>&1 | head -1) > kernel.txt; sleep 5"}, 256<<20)
	d.Sandbox.Isolation = messages.IsolationGVisor
	log := e.submit(d)
	// Beside it, in the runner's second slot, a dispatch that asks for
	// nothing runs under the runc floor, on another branch.
	rd := e.dispatch([]string{"/bin/sh", "-c", "(dmesg 2>&1 | head -1) > kernel.txt; sleep 5"}, 256<<20)
	rd.Lease.WorktreeKey = "forge/runc-beside"
	rlog := e.submit(rd)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := e.engine.ContainerInspect(ctx, names.Container) // the task sleeps 5 s after its start
	require.NoError(t, err)
	assert.Equal(t, "runsc", info.HostConfig.Runtime, "the worker of a dispatch asking for gVisor runs under runsc on a runc floor")
	assert.Equal(t, "none", string(info.HostConfig.NetworkMode))
	// The running attempt's ledger records its isolation (the worker's
	// events are delivered only once a ledger write after the worker's
	// creation is durable).
	entry, err := ledger.Store{Root: e.stateRoot}.Read(d.AttemptID())
	require.NoError(t, err)
	assert.Equal(t, messages.IsolationGVisor, entry.Isolation)
	assert.Equal(t, "runsc", entry.WorkerRuntime)
	// forged inspect shows them as the attempt actor's facts.
	facts := attemptFacts(e.runner, d.AttemptID())
	assert.Equal(t, messages.IsolationGVisor, facts["isolation"])
	assert.Equal(t, "runsc", facts["workerRuntime"])
	waitForEvent(t, rlog, "task_started")
	rentry, err := ledger.Store{Root: e.stateRoot}.Read(rd.AttemptID())
	require.NoError(t, err)
	assert.Equal(t, messages.IsolationRunc, rentry.Isolation)
	assert.Empty(t, rentry.WorkerRuntime, "a runc worker runs under the engine's default runtime")
	rfacts := attemptFacts(e.runner, rd.AttemptID())
	assert.Equal(t, messages.IsolationRunc, rfacts["isolation"])
	assert.NotContains(t, rfacts, "workerRuntime")

	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.Contains(t, e.git("show", example.Branch+":kernel.txt"), "Starting gVisor", "the task ran on gVisor's kernel")
	assert.Equal(t, messages.IsolationGVisor, out.Isolation, "the outcome records the isolation")
	assert.Equal(t, "runsc", out.WorkerRuntime)
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
	rout := e.wait(rlog)
	require.Equal(t, messages.StatusSucceeded, rout.Status, "%s: %s; events %v", rout.Code, rout.Message, eventSummary(rlog))
	assert.NotContains(t, e.git("show", "forge/runc-beside:kernel.txt"), "Starting gVisor", "the runc task ran on the host's kernel")
	assert.Equal(t, messages.IsolationRunc, rout.Isolation, "the outcome records the isolation")
	assert.Empty(t, rout.WorkerRuntime)

	// Without a working runsc the dispatch is refused, never run under runc.
	n := newE2E(t, runner.Config{Isolation: messages.IsolationRunc, AllowGVisorDispatch: true, GVisorRuntime: "forged-test-runtime-not-registered"})
	report = n.runner.Preflight(context.Background())
	require.True(t, report.Available, "a runc floor stays available: %s: %s", report.Code, report.Reason)
	assert.False(t, report.Isolation.GVisor.Registered)
	nd := n.dispatch(nil, 0)
	nd.Sandbox.Isolation = messages.IsolationGVisor
	out = n.wait(n.submit(nd))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxIsolationUnavailable), out.Code, out.Message)
	assert.Contains(t, out.Message, "forged-test-runtime-not-registered", "the refusal names the runtime")
	assert.Empty(t, out.Isolation, "refused at the isolation decision: no isolation is recorded")
	assert.False(t, n.branchExists(example.Branch))
}

// TestGVisorEndToEndSandboxRequiredDemandsGVisorOnARuncFloor: a runc-floor
// runner with --sandbox-required-isolation gvisor (and no
// --allow-gvisor-dispatch: the demand alone makes it probe runsc) stays a
// runc host. Where runsc is not registered, a sandbox_required dispatch is
// refused with sandbox_isolation_unavailable before anything is created,
// never run under runc. Where runsc works, the same dispatch passes the
// isolation decision and meets the next guard of sandbox_required: this
// engine enforces no LSM (docker info lists no apparmor or selinux), so
// the dispatch is refused with sandbox_security_unavailable, and a worker
// under runsc cannot be observed here (docs/gvisor.md, "Not done"). An
// adoption dispatch on the same runner is not affected by the demand: its
// worker runs under runc, on the host's kernel.
func TestGVisorEndToEndSandboxRequiredDemandsGVisorOnARuncFloor(t *testing.T) {
	const missing = "forged-test-runtime-not-registered"
	n := newE2E(t, runner.Config{Isolation: messages.IsolationRunc, SandboxRequiredIsolation: messages.IsolationGVisor, GVisorRuntime: missing})
	report := n.runner.Preflight(context.Background())
	require.True(t, report.Available, "a runc floor stays available: %s: %s", report.Code, report.Reason)
	assert.False(t, report.Isolation.GVisor.Registered)
	nd := n.dispatch(nil, 0)
	nd.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
	nd.Sandbox.SandboxConfigCommitSHA = strings.TrimSpace(n.git("rev-parse", "HEAD")) // sandbox_required's approved config commit
	out := n.wait(n.submit(nd))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxIsolationUnavailable), out.Code, out.Message)
	assert.Contains(t, out.Message, missing, "the refusal names the runtime")
	assert.Contains(t, out.Message, "--sandbox-required-isolation", "the refusal names the operator's setting")
	assert.False(t, n.branchExists(example.Branch))

	e := newE2E(t, runner.Config{Isolation: messages.IsolationRunc, SandboxRequiredIsolation: messages.IsolationGVisor})
	report = e.runner.Preflight(context.Background())
	require.True(t, report.Available, "%s: %s", report.Code, report.Reason)
	assert.Equal(t, messages.IsolationRunc, report.Isolation.Floor)
	require.True(t, report.Isolation.GVisor.Works, "the demand alone probes runsc (run scripts/ensure-runsc.sh if it does not work): %s", report.Isolation.GVisor.Reason)
	rd := e.dispatch(nil, 0)
	rd.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
	rd.Sandbox.SandboxConfigCommitSHA = strings.TrimSpace(e.git("rev-parse", "HEAD")) // sandbox_required's approved config commit
	out = e.wait(e.submit(rd))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxSecurityUnavailable), out.Code, "past the isolation decision, refused by the next guard: %s", out.Message)
	assert.Contains(t, out.Message, "LSM", out.Message)
	assert.False(t, e.branchExists(example.Branch))

	ad := e.dispatch([]string{"/bin/sh", "-c", "(dmesg 2>&1 | head -1) > kernel.txt; sleep 3"}, 256<<20)
	log := e.submit(ad)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(ad.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := e.engine.ContainerInspect(ctx, names.Container) // the task sleeps 3 s after its start
	require.NoError(t, err)
	assert.NotEqual(t, "runsc", info.HostConfig.Runtime, "the demand is sandbox_required's alone")
	out = e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.NotContains(t, e.git("show", example.Branch+":kernel.txt"), "Starting gVisor", "the adoption task ran on the host's kernel")
}

// TestGVisorEndToEndProbeImageIsTheOperators: the probe containers run the
// operator's image (--gvisor-probe-image): the example's busybox named by
// its image id works; an image the engine does not hold leaves the
// gvisor floor unavailable, the reason naming it, and nothing is pulled.
func TestGVisorEndToEndProbeImageIsTheOperators(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img, err := engine.ImageInspect(ctx, example.BaseImage)
	require.NoError(t, err, "build the example image (scripts/example.sh)")
	e := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor, GVisorProbeImage: img.ID})
	report := e.runner.Preflight(context.Background())
	require.True(t, report.Available, "%s: %s", report.Code, report.Reason)
	assert.True(t, report.Isolation.GVisor.Works, report.Isolation.GVisor.Reason)
	assert.True(t, report.Isolation.GVisorNetwork.Works, report.Isolation.GVisorNetwork.Reason)

	const missing = "forged-test/no-such-probe:1"
	m := newE2E(t, runner.Config{Isolation: messages.IsolationGVisor, GVisorProbeImage: missing})
	report = m.runner.Preflight(context.Background())
	assert.False(t, report.Available)
	assert.Equal(t, failure.SandboxIsolationUnavailable, report.Code, report.Reason)
	assert.Contains(t, report.Reason, missing)
	_, err = engine.ImageInspect(ctx, missing)
	assert.True(t, cerrdefs.IsNotFound(err), "the probe image was not pulled: %v", err)
}

// attemptFacts are the inspect facts of attempt id's actor (forged
// inspect); nil when it is not in the tree.
func attemptFacts(r *runner.Runner, id string) map[string]string {
	for _, reply := range r.Inspect() {
		if reply.Kind == "attempt" && reply.Facts["attemptId"] == id {
			return reply.Facts
		}
	}
	return nil
}
