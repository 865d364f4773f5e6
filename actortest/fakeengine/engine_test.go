package fakeengine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

// fastRetries keep the engine client's retries of injected faults short.
var fastRetries = dockerops.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsed: time.Second}

func connect(t *testing.T, e *fakeengine.Engine) *dockerops.Client {
	t.Helper()
	c, err := dockerops.Connect(context.Background(), dockerops.Options{Host: e.Host(), Retry: fastRetries, StopGrace: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sandbox is one attempt's objects on the engine, made through dockerops.
type sandbox struct {
	owner     dockerops.Ownership
	container string
}

func provision(t *testing.T, e *fakeengine.Engine, c *dockerops.Client) sandbox {
	t.Helper()
	ctx := context.Background()
	d := actortest.NewDispatch(time.Now().Add(time.Hour))
	labels, err := dockerops.Labels(d, "sha256:img", "sha256:contract")
	require.NoError(t, err)
	e.AddImage("forge/agent:k", map[string]string{"org.example.image": "agent"})
	hex := d.Sandbox.DispatchAttemptID[:8]
	_, err = c.CreateIsolatedNetwork(ctx, "forge-"+hex, labels)
	require.NoError(t, err)
	for _, v := range []string{"ws", "ctl", "sec"} {
		require.NoError(t, c.CreateVolume(ctx, "forge-"+hex+"-"+v, labels))
	}
	id, err := c.CreateWorker(ctx, dockerops.WorkerSpec{
		Name: "forge-" + hex, Image: "forge/agent:k", Network: "forge-" + hex, WorkingDir: messages.WorkspaceDir,
		Labels: labels, Resources: d.Sandbox.RequestedResources,
		WorkspaceVolume: "forge-" + hex + "-ws", ControlVolume: "forge-" + hex + "-ctl", SecretsVolume: "forge-" + hex + "-sec",
		Entrypoint: []string{messages.WorkerBinaryPath, "worker"},
	})
	require.NoError(t, err)
	return sandbox{owner: dockerops.OwnershipOf(d), container: id}
}

func teardown(t *testing.T, c *dockerops.Client, s sandbox) dockerops.CleanupReport {
	t.Helper()
	report, err := c.Teardown(context.Background(), s.owner, "attempt")
	require.NoError(t, err)
	return report
}

func TestDockeropsRunsAWorkerOnTheFakeEngine(t *testing.T) {
	e := fakeengine.New(t)
	// The program echoes its stdin lines, complains on stderr, reads the
	// file copied in and writes its output into the control volume.
	e.RunAll(func(_ context.Context, p *fakeengine.Process) int {
		in := bufio.NewScanner(p.Stdin)
		for in.Scan() {
			fmt.Fprintf(p.Stdout, "echo %s\n", in.Text())
		}
		fmt.Fprintln(p.Stderr, "a warning")
		input, err := os.ReadFile(p.Path(messages.ControlDir + "/input/bundle"))
		if err != nil {
			return 2
		}
		if err := p.Container.WriteFile(messages.OutputDir+"/result.txt", append([]byte("got "), input...)); err != nil {
			return 2
		}
		return 3
	})
	c := connect(t, e)
	s := provision(t, e, c)
	ctx := context.Background()

	require.NoError(t, c.CopyFileInto(ctx, s.container, messages.ControlDir+"/input", "bundle", bytes.NewReader([]byte("bundle!")), 7, 10001, 10001, 0o600))
	var lines []string
	res, err := c.RunAttached(ctx, s.container, []byte("one\ntwo\n"), func(l []byte) error { lines = append(lines, string(l)); return nil }, dockerops.RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, []string{"echo one", "echo two"}, lines)
	assert.Contains(t, res.Stderr, "a warning")

	state, err := c.InspectState(ctx, s.container)
	require.NoError(t, err)
	assert.Equal(t, 3, state.ExitCode)
	assert.False(t, state.Running)

	out := filepath.Join(t.TempDir(), "out")
	require.NoError(t, c.CopyDirOut(ctx, s.container, messages.OutputDir, out, 1<<20, 10))
	got, err := os.ReadFile(filepath.Join(out, "result.txt"))
	require.NoError(t, err)
	assert.Equal(t, "got bundle!", string(got))

	report := teardown(t, c, s)
	assert.Zero(t, report.Remaining)
	assert.Len(t, report.Actions, 5, "a container, a network, three volumes")
	e.AssertClean(t, dockerops.LabelManaged)
	assert.Equal(t, 1, e.CallCount(fakeengine.OpContainerAttach))
}

func TestOOMKillAndMemoryFacts(t *testing.T) {
	e := fakeengine.New(t)
	sampled := make(chan struct{})
	e.RunAll(func(ctx context.Context, p *fakeengine.Process) int {
		p.Container.SetMemory(100<<20, 256<<20, map[string]uint64{"total_inactive_file": 20 << 20})
		close(sampled)
		<-ctx.Done()
		p.Container.SetOOMKilled()
		return 137
	})
	c := connect(t, e)
	s := provision(t, e, c)
	ctx := context.Background()
	done := make(chan dockerops.RunResult, 1)
	go func() {
		res, _ := c.RunAttached(ctx, s.container, nil, nil, dockerops.RunLimits{})
		done <- res
	}()
	<-sampled
	used, err := c.MemoryUsage(ctx, s.container)
	require.NoError(t, err)
	assert.Equal(t, uint64(80<<20), used, "usage less the inactive page cache (cgroup v1)")

	e.Container(s.container).Stop()
	res := <-done
	assert.Equal(t, 137, res.ExitCode)
	state, err := c.InspectState(ctx, s.container)
	require.NoError(t, err)
	assert.True(t, state.OOMKilled)
	teardown(t, c, s)
	e.AssertClean(t, dockerops.LabelManaged)
}

func TestInjectedFaultsReachTheClient(t *testing.T) {
	e := fakeengine.New(t)
	c := connect(t, e)
	ctx := context.Background()

	// A transient error (503) of a write is retried; the call succeeds the
	// second time.
	e.Inject(fakeengine.OpNetworkCreate, fakeengine.Fault{Status: 503, Message: "engine busy", Times: 1})
	_, err := c.CreateIsolatedNetwork(ctx, "forge-net", map[string]string{dockerops.LabelManaged: "true"})
	require.NoError(t, err)
	assert.Equal(t, 2, e.CallCount(fakeengine.OpNetworkCreate))

	// An engine-internal error of a write is not.
	e.Inject(fakeengine.OpVolumeCreate, fakeengine.Fault{Status: 500, Message: "no space left on device"})
	err = c.CreateVolume(ctx, "forge-vol", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no space left on device")
	assert.Equal(t, 1, e.CallCount(fakeengine.OpVolumeCreate))

	// A dropped connection on a read is retried.
	e.Inject(fakeengine.OpNetworkInspect, fakeengine.Fault{Drop: true, Times: 1})
	e.Inject(fakeengine.OpContainerInspect, fakeengine.Fault{Drop: true, Times: 1})
	_, err = c.InspectState(ctx, "missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "No such container")
	assert.Equal(t, 2, e.CallCount(fakeengine.OpContainerInspect))

	// Latency beyond the call's deadline is a timeout.
	slow, err := dockerops.Connect(ctx, dockerops.Options{Host: e.Host(), Retry: fastRetries, Timeouts: dockerops.Timeouts{Inspect: 20 * time.Millisecond}})
	require.NoError(t, err)
	defer slow.Close()
	e.Inject(fakeengine.OpContainerInspect, fakeengine.Fault{Latency: time.Second})
	_, err = slow.InspectState(ctx, "nothing")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	e.Clear("")

	assert.Len(t, e.Labelled(dockerops.LabelManaged), 1, "the network is left")
	e.AssertClean(&quiet{TB: t}, dockerops.LabelManaged)
}

// quiet records whether AssertClean would fail, without failing.
type quiet struct {
	testing.TB
	failed bool
}

func (q *quiet) Helper()                   {}
func (q *quiet) Errorf(string, ...any)     { q.failed = true }
func (q *quiet) Fatalf(f string, a ...any) { q.failed = true }

func TestAssertCleanSeesWhatIsLeft(t *testing.T) {
	e := fakeengine.New(t)
	c := connect(t, e)
	_, err := c.CreateIsolatedNetwork(context.Background(), "forge-left", map[string]string{dockerops.LabelManaged: "true"})
	require.NoError(t, err)
	q := &quiet{TB: t}
	e.AssertClean(q, dockerops.LabelManaged)
	assert.True(t, q.failed)
	q = &quiet{TB: t}
	e.AssertClean(q, "some.other.label")
	assert.False(t, q.failed)
}

func TestEngineRestartKillsRunningContainersAndBreaksStreams(t *testing.T) {
	e := fakeengine.New(t)
	started := make(chan struct{})
	var runs atomic.Int32
	e.RunAll(func(ctx context.Context, p *fakeengine.Process) int {
		// A start whose answer the restart cut off is retried by the
		// client, as it would be against a real engine: that second run
		// exits at once.
		if runs.Add(1) > 1 {
			return 0
		}
		close(started)
		<-ctx.Done()
		return 0
	})
	c := connect(t, e)
	s := provision(t, e, c)
	done := make(chan error, 1)
	go func() {
		_, err := c.RunAttached(context.Background(), s.container, nil, nil, dockerops.RunLimits{})
		done <- err
	}()
	<-started
	require.NoError(t, e.Restart())
	select {
	case <-done:
	case <-time.After(actortest.DefaultWithin):
		t.Fatal("the attached run did not end when the engine restarted")
	}
	state := e.Container(s.container).State()
	assert.False(t, state.Running)
	if runs.Load() == 1 {
		assert.Equal(t, 255, state.ExitCode, "killed by the restart")
	}
	teardown(t, c, s)
	e.AssertClean(t, dockerops.LabelManaged)
}

func TestEngineDownIsUnreachable(t *testing.T) {
	e := fakeengine.New(t)
	e.Down()
	_, err := dockerops.Connect(context.Background(), dockerops.Options{Host: e.Host(), Retry: fastRetries})
	require.Error(t, err)
	assert.Equal(t, failure.DockerUnreachable, failure.CodeOf(err))
	require.NoError(t, e.Up())
	connect(t, e)
}

func TestLeaseUpdateThroughExec(t *testing.T) {
	e := fakeengine.New(t)
	e.RunAll(fakeengine.Block())
	got := make(chan []byte, 1)
	e.OnExec(func(cmd []string) bool { return len(cmd) == 3 && cmd[2] == "lease-update" }, func(_ context.Context, p *fakeengine.Process) int {
		b, _ := io.ReadAll(p.Stdin)
		got <- b
		return 0
	})
	c := connect(t, e)
	s := provision(t, e, c)
	go func() { _, _ = c.RunAttached(context.Background(), s.container, nil, nil, dockerops.RunLimits{}) }()
	require.Eventually(t, func() bool { return e.Container(s.container).State().Running }, actortest.DefaultWithin, time.Millisecond)

	key, err := lease.NewControlKey()
	require.NoError(t, err)
	u, err := lease.Sign(s.owner.AttemptID, s.owner.FencingToken, time.Now().Add(time.Hour), key)
	require.NoError(t, err)
	raw, err := json.Marshal(u)
	require.NoError(t, err)
	require.NoError(t, c.WriteLeaseUpdate(context.Background(), s.container, raw))
	assert.JSONEq(t, string(raw), string(<-got))

	e.OnExec(func([]string) bool { return true }, func(_ context.Context, p *fakeengine.Process) int {
		fmt.Fprintln(p.Stderr, "lease rejected")
		return 1
	})
	err = c.WriteLeaseUpdate(context.Background(), s.container, raw)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lease rejected")
	teardown(t, c, s)
	e.AssertClean(t, dockerops.LabelManaged)
}

func TestImageBuildInspectAndFailure(t *testing.T) {
	e := fakeengine.New(t)
	c := connect(t, e)
	ctx := context.Background()
	var log []string
	id, err := c.BuildImage(ctx, dockerops.BuildRequest{ContextTar: bytes.NewReader(nil), Tags: []string{"forge/project:k"}, OnLog: func(l string) { log = append(log, l) }})
	require.NoError(t, err)
	got, found, err := c.ImageID(ctx, "forge/project:k")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, id, got)
	assert.NotEmpty(t, log)

	_, found, err = c.ImageID(ctx, "forge/project:missing")
	require.NoError(t, err)
	assert.False(t, found)

	e.FailBuilds(1, "step 2/3: exit code 1")
	_, err = c.BuildImage(ctx, dockerops.BuildRequest{ContextTar: bytes.NewReader(nil), Tags: []string{"forge/project:bad"}})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err))
	assert.Contains(t, err.Error(), "step 2/3")
}

func TestPreflightReadsTheEnginesFacts(t *testing.T) {
	e := fakeengine.New(t)
	e.SetInfo(func(i *system.Info) {
		i.CgroupVersion = "2"
		i.SecurityOptions = append(i.SecurityOptions, "name=rootless")
	})
	engine, err := client.NewClientWithOpts(client.WithHost(e.Host()), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	defer engine.Close()
	report := preflight.NewChecker(engine, nil, preflight.Options{Endpoint: e.Host(), StateRoot: t.TempDir()}).Check(context.Background())
	assert.True(t, report.Features.Rootless, "%+v", report)
	assert.Equal(t, "2", report.Features.CgroupVersion)
	assert.Equal(t, 1, e.CallCount(fakeengine.OpInfo))
}

func TestHealthAndCgroupV2MemoryFacts(t *testing.T) {
	e := fakeengine.New(t)
	e.SetInfo(func(i *system.Info) { i.CgroupVersion = "2"; i.CgroupDriver = "systemd" })
	ready := make(chan struct{})
	e.RunAll(func(ctx context.Context, p *fakeengine.Process) int {
		p.Container.SetHealth("unhealthy")
		p.Container.SetMemory(64<<20, 256<<20, map[string]uint64{"inactive_file": 16 << 20})
		close(ready)
		<-ctx.Done()
		return 137
	})
	c := connect(t, e)
	s := provision(t, e, c)
	go func() { _, _ = c.RunAttached(context.Background(), s.container, nil, nil, dockerops.RunLimits{}) }()
	<-ready

	raw, err := client.NewClientWithOpts(client.WithHost(e.Host()), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	defer raw.Close()
	inspected, err := raw.ContainerInspect(context.Background(), s.container)
	require.NoError(t, err)
	require.NotNil(t, inspected.State.Health)
	assert.Equal(t, "unhealthy", string(inspected.State.Health.Status))
	info, err := raw.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "2", info.CgroupVersion)

	used, err := c.MemoryUsage(context.Background(), s.container)
	require.NoError(t, err)
	assert.Equal(t, uint64(48<<20), used, "usage less inactive_file (cgroup v2)")
	teardown(t, c, s)
	e.AssertClean(t, dockerops.LabelManaged)
}

// A kill call's signal reaches the program (Process.Signals), as a
// container's init forwards it: dockerops.ReleaseWorker's signal ends a
// program waiting for it with its own exit code. SIGKILL stops it.
func TestKillDeliversSignalsToTheProgram(t *testing.T) {
	e := fakeengine.New(t)
	got := make(chan os.Signal, 1)
	e.RunAll(func(ctx context.Context, p *fakeengine.Process) int {
		select {
		case sig := <-p.Signals:
			got <- sig
			return 0
		case <-ctx.Done():
			return 137
		}
	})
	c := connect(t, e)
	s := provision(t, e, c)
	done := make(chan dockerops.RunResult, 1)
	go func() {
		res, err := c.RunAttached(context.Background(), s.container, nil, nil, dockerops.RunLimits{})
		assert.NoError(t, err)
		done <- res
	}()
	require.Eventually(t, func() bool { return e.Container(s.container).State().Running }, actortest.DefaultWithin, time.Millisecond)
	require.NoError(t, c.ReleaseWorker(context.Background(), s.container))
	select {
	case res := <-done:
		assert.Equal(t, 0, res.ExitCode)
	case <-time.After(actortest.DefaultWithin):
		t.Fatal("the program did not see the release signal")
	}
	assert.Equal(t, "user defined signal 1", (<-got).String())
	assert.Equal(t, 1, e.CallCount(fakeengine.OpContainerKill))
	assert.Error(t, c.ReleaseWorker(context.Background(), s.container), "a container not running cannot be released")
	teardown(t, c, s)
	e.AssertClean(t, dockerops.LabelManaged)
}
