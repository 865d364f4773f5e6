package main_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/testkit/egresstest"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// daemon is one `forged daemon` process of the chaos test. api is the
// typed client; client is raw HTTP, for the tests that read the wire
// itself (the publication test scans every body for secrets).
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	socket string
	api    *client.Client
	client *http.Client
}

func startDaemon(t *testing.T, forged, stateRoot, lockRoot string, extra ...string) *daemon {
	t.Helper()
	socket := filepath.Join(stateRoot, "forged.sock")
	cmd := exec.Command(forged, append([]string{"daemon", "--socket", socket, "--state-root", stateRoot,
		"--allow-rootful", "--host-reserved-cores", "0", "--slots", "2"}, extra...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+lockRoot)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	// A test that fails before it stops its daemon must not leave it
	// holding the Docker context lock for the next one.
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	d := &daemon{t: t, cmd: cmd, socket: socket, api: client.New(socket), client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}}
	require.Eventually(t, func() bool {
		_, err := d.api.Snapshot(d.callCtx())
		return err == nil
	}, 60*time.Second, 50*time.Millisecond, "the daemon did not come up")
	return d
}

// callCtx bounds one request to the daemon.
func (d *daemon) callCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

func (d *daemon) kill9() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.cmd.Wait()
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		d.kill9()
		d.t.Error("the daemon did not exit within 90 s of SIGTERM")
	}
}

func (d *daemon) submit(dispatch *messages.Dispatch) {
	d.t.Helper()
	_, err := d.api.Submit(d.callCtx(), dispatch)
	require.NoError(d.t, err)
}

// waitFor follows the attempt's events until one of eventType arrives.
func (d *daemon) waitFor(attemptID, eventType string) {
	d.t.Helper()
	var seen []string
	arrived := errors.New("arrived")
	out, err := d.api.Events(context.Background(), attemptID, func(ev messages.Event) error {
		seen = append(seen, ev.EventType)
		if ev.EventType == eventType {
			return arrived
		}
		return nil
	})
	switch {
	case errors.Is(err, arrived):
	case err == nil:
		d.t.Fatalf("attempt finished (%s: %s) before %s; events %v", out.Code, out.Message, eventType, seen)
	default:
		d.t.Fatalf("stream ended before %s (%v); events %v", eventType, err, seen)
	}
}

// outcome follows the attempt's events to its outcome; nil when the daemon
// does not know the attempt, or the stream ended without one.
func (d *daemon) outcome(attemptID string) *messages.AttemptOutcome {
	out, err := d.api.Events(context.Background(), attemptID, func(messages.Event) error { return nil })
	var refused *client.Error
	if errors.As(err, &refused) || errors.Is(err, client.ErrStreamEnded) {
		return nil
	}
	require.NoError(d.t, err)
	return &out
}

func (d *daemon) reportsFor(attemptID string) int {
	reports, err := d.api.CleanupReports(d.callCtx())
	require.NoError(d.t, err)
	n := 0
	for _, r := range reports {
		for _, a := range r.Actions {
			if a.DispatchAttemptID == attemptID {
				n++
				break
			}
		}
	}
	return n
}

// chaosRoots makes a daemon's state and lock roots under a fresh directory
// (base, which also holds the test's repositories) and loads the runner id
// of that state root.
func chaosRoots(t *testing.T) (base, stateRoot, lockRoot, runnerID string) {
	t.Helper()
	base = t.TempDir()
	stateRoot, lockRoot = filepath.Join(base, "state"), filepath.Join(base, "locks")
	require.NoError(t, os.MkdirAll(lockRoot, 0o700))
	runnerID, err := runner.LoadRunnerID(stateRoot)
	require.NoError(t, err)
	return base, stateRoot, lockRoot, runnerID
}

// serviceCatalogue is the absolute path of the service catalogue
// scripts/service-images.sh writes ($FORGED_SERVICES_FILE, or
// bin/services.tsv): a test that needs it fails under CI=true without it,
// and skips elsewhere.
func serviceCatalogue(t *testing.T) string {
	t.Helper()
	catalogue := os.Getenv("FORGED_SERVICES_FILE")
	if catalogue == "" {
		catalogue = filepath.Join("..", "..", "bin", "services.tsv")
	}
	catalogue, err := filepath.Abs(catalogue)
	require.NoError(t, err)
	if _, err := os.Stat(catalogue); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no service catalogue (run scripts/service-images.sh): %v", err)
		}
		t.Skipf("no service catalogue (run scripts/service-images.sh): %v", err)
	}
	return catalogue
}

// TestChaosKill9AtEachPhase kills the daemon with SIGKILL at each phase of
// an attempt, starts it again on the same state root, and checks that the
// start-up reaper removed everything the attempt had created, reported it,
// and recorded the attempt as sandbox_runner_restarted; or, once its worker
// ran, that the restarted daemon re-adopted it and finished it.
func TestChaosKill9AtEachPhase(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	phases := []struct {
		event            string
		createdResources bool // the attempt's ledger exists at this point
		// readopt: the worker ran, so the restarted daemon re-adopts the
		// attempt (see readopt_integration_test.go); maybe: the kill may
		// land before or after the worker started.
		readopt, maybe bool
	}{
		{"sandbox_preparing", false, false, false},
		{"sandbox_build_started", false, false, false},
		{"sandbox_started", true, false, true},
		{"task_started", true, true, false},
		// The host saw the worker exit: past running, the attempt is reaped,
		// unless the kill landed before the ledger said so (then it is
		// collected like a worker that finished while forged was away).
		{"sandbox_agent_exited", true, false, true},
		// Collecting (the kill may land before the ledger records the
		// exit: then collected) and importing (its result judged, here
		// unchanged: recorded, reaped).
		{"sandbox_peak_memory_observed", true, false, true},
		{"sandbox_output_unchanged", true, false, false},
		{"sandbox_teardown_started", true, false, false},
	}
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	for i, phase := range phases {
		t.Run(phase.event, func(t *testing.T) {
			// A Dockerfile unique to the phase makes the build phase real.
			if phase.event == "sandbox_build_started" {
				dir := filepath.Join(base, "repo-build")
				require.NoError(t, example.CreateRepo(ctx, dir, example.RepoOptions{
					Dockerfile: "FROM " + example.BaseImage + "\nRUN sleep 3\nLABEL chaos=" + example.NewUUID() + "\n"}))
				repo = dir
			} else {
				repo = filepath.Join(base, "repo")
			}
			d := startDaemon(t, forged, stateRoot, lockRoot)
			dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
				Argv: []string{"/bin/sh", "-c", "echo working; sleep 2; echo done > chaos.txt"}})
			require.NoError(t, err)
			d.submit(dispatch)
			d.waitFor(dispatch.AttemptID(), phase.event)
			d.kill9()

			restarted := startDaemon(t, forged, stateRoot, lockRoot)
			defer restarted.stop()
			if phase.readopt || phase.maybe {
				got := restarted.follow(dispatch.AttemptID())
				readopted := slices.Contains(got.types, "sandbox_readopted")
				switch {
				case phase.readopt:
					require.True(t, readopted, "events %v", got.types)
					assert.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s", got.outcome.Code, got.outcome.Message)
				case readopted:
					// The kill may land while forged hands the started worker
					// its start packet: re-adopted, the worker then exits
					// without one signed event, and the attempt ends
					// sandbox_runner_restarted without running the task
					// (actors.onWorkerExited); otherwise it runs to the end.
					if got.outcome.Status != messages.StatusSucceeded {
						assert.Equal(t, string(failure.SandboxRunnerRestarted), got.outcome.Code, got.outcome.Message)
						assert.Contains(t, got.outcome.Message, "start packet")
					}
				default:
					assert.Contains(t, []string{"sandbox_runner_restarted", "sandbox_readopt_worker_gone"}, got.outcome.Code, got.outcome.Message)
					assert.Positive(t, restarted.reportsFor(dispatch.AttemptID()), "a cleanup report is pending for the attempt")
				}
			}
			enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
			assertNoVolumeImages(t, stateRoot)
			if phase.createdResources && !phase.readopt && !phase.maybe {
				out := restarted.outcome(dispatch.AttemptID())
				require.NotNil(t, out, "the restarted daemon records the attempt")
				assert.Equal(t, "sandbox_runner_restarted", out.Code)
				assert.Positive(t, restarted.reportsFor(dispatch.AttemptID()), "a cleanup report is pending for the attempt")
			}
			entries, err := os.ReadDir(filepath.Join(stateRoot, "ledger"))
			if err == nil {
				assert.Empty(t, entries, "no ledger is left after phase %d", i)
			}
			// Nothing of the dead attempt is left in the state root: its
			// work directory (bundle, context, output) and quarantine.
			for _, dir := range []string{"attempts", "quarantine"} {
				entries, err := os.ReadDir(filepath.Join(stateRoot, dir))
				if err == nil {
					assert.Empty(t, entries, "STATE_ROOT/%s holds nothing after phase %d", dir, i)
				}
			}
		})
	}
}

// assertNoVolumeImages checks that no filesystem image is left in the
// state root and no loop device is still bound to one.
func assertNoVolumeImages(t *testing.T, stateRoot string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateRoot, quota.ImageDir))
	if err == nil {
		assert.Empty(t, entries, "volume images are left")
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		raw, _ := os.ReadFile(b)
		assert.NotContains(t, string(raw), stateRoot, "a loop device is still bound to an image: %s", b)
	}
}

// TestSIGTERMDrainsTheDaemon sends SIGTERM while an attempt runs: the
// daemon cancels it, tears it down and exits within the bound, leaving no
// labelled resource and no ledger behind.
func TestSIGTERMDrainsTheDaemon(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(context.Background(), repo, example.RepoOptions{}))

	d := startDaemon(t, forged, stateRoot, lockRoot)
	dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo, Argv: []string{"/bin/sh", "-c", "sleep 300"}})
	require.NoError(t, err)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	started := time.Now()
	d.stop()
	assert.Less(t, time.Since(started), 60*time.Second)
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	entries, err := os.ReadDir(filepath.Join(stateRoot, "ledger"))
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestChaosKill9WhileServicesRun kills forged while an attempt's postgres
// and redis run before the worker: the restarted daemon's start-up reaper
// removes the services, their network and every probe or helper container
// with the rest, and reports the attempt restarted. (Services beside a
// running worker are re-adopted: readopt_services_integration_test.go.)
func TestChaosKill9WhileServicesRun(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue := serviceCatalogue(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{
		Contract: "version: 1\nworkingDirectory: /workspace\nservices:\n  - type: postgres\n  - type: redis\ncaches: []\n"}))
	codes := map[string]string{"sandbox_service_ready": "sandbox_runner_restarted"}
	for _, event := range []string{"sandbox_service_ready"} {
		t.Run(event, func(t *testing.T) {
			d := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
			dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
				Argv: []string{"/bin/sh", "-c", "sleep 30"}})
			require.NoError(t, err)
			dispatch.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 2 << 30
			d.submit(dispatch)
			d.waitFor(dispatch.AttemptID(), event)
			assert.NotEmpty(t, enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+dispatch.AttemptID()))
			d.kill9()

			restarted := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
			defer restarted.stop()
			enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
			out := restarted.outcome(dispatch.AttemptID())
			require.NotNil(t, out, "the restarted daemon records the attempt")
			assert.Equal(t, codes[event], out.Code)
			entries, err := os.ReadDir(filepath.Join(stateRoot, "ledger"))
			if err == nil {
				assert.Empty(t, entries, "no ledger is left")
			}
		})
	}
}

// TestChaosKill9LeavesNoPerAttemptCache kills forged while a task fills its
// per-attempt npm cache; the restarted forged re-adopts the attempt, and
// once it finished leaves no volume of the attempt (the cache's included)
// and no bounded image behind.
func TestChaosKill9LeavesNoPerAttemptCache(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{
		Contract: "version: 1\nworkingDirectory: /workspace\ncaches:\n  - {name: npm, mode: per_attempt}\n"}))
	d := startDaemon(t, forged, stateRoot, lockRoot, "--cache-bytes", "67108864")
	dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "echo cached > $npm_config_cache/entry; echo filled; sleep 30"}})
	require.NoError(t, err)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "task_started")
	names, err := dockerops.NamesFor(dispatch.AttemptID())
	require.NoError(t, err)
	_, err = engine.VolumeInspect(ctx, names.CacheVolume("npm"))
	require.NoError(t, err, "the per-attempt cache exists while the task runs")
	d.kill9()

	restarted := startDaemon(t, forged, stateRoot, lockRoot)
	defer restarted.stop()
	got := restarted.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	assert.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s", got.outcome.Code, got.outcome.Message)
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	_, err = engine.VolumeInspect(ctx, names.CacheVolume("npm"))
	assert.True(t, cerrdefs.IsNotFound(err), "the cache volume is removed: %v", err)
	assertNoVolumeImages(t, stateRoot)
}

// TestChaosKill9WhileTheEgressProxyRuns kills forged with SIGKILL while a
// public_allowlist attempt's egress proxy is ready and its worker not yet
// started: the restarted daemon leaves nothing labelled, the egress
// network and the proxy included, and reports the attempt restarted.
// (A proxy beside a running worker is re-adopted:
// readopt_egress_integration_test.go.)
func TestChaosKill9WhileTheEgressProxyRuns(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue := serviceCatalogue(t)
	egresstest.EgressImage(t, filepath.Join("..", ".."))
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))
	flags := []string{"--service-catalogue", catalogue, "--egress"}
	codes := map[string]string{"sandbox_egress_ready": "sandbox_runner_restarted"}
	for _, event := range []string{"sandbox_egress_ready"} {
		t.Run(event, func(t *testing.T) {
			d := startDaemon(t, forged, stateRoot, lockRoot, flags...)
			dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
				Argv: []string{"/bin/sh", "-c", "sleep 30"}})
			require.NoError(t, err)
			dispatch.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: []string{"www.test"}}
			dispatch.Sandbox.RequestedResources.RuntimeOverheadBytes = 384 << 20
			d.submit(dispatch)
			d.waitFor(dispatch.AttemptID(), event)
			left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+dispatch.AttemptID())
			assert.Contains(t, strings.Join(left, " "), "-egress", "the egress network exists: %v", left)
			d.kill9()

			restarted := startDaemon(t, forged, stateRoot, lockRoot, flags...)
			defer restarted.stop()
			enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
			out := restarted.outcome(dispatch.AttemptID())
			require.NotNil(t, out, "the restarted daemon records the attempt")
			assert.Equal(t, codes[event], out.Code)
		})
	}
}
