package runner_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/testbin"
	"github.com/forgedev/forged/messages"
)

// These tests run whole attempts whose task exhausts one resource, and
// check the telemetry and the failure code against the kernel's counters.
// The task is the busybox base plus internal/stressprog, a static helper
// the test builds.

// stressBinary builds internal/testkit/stressprog once per test process.
func stressBinary(tb testing.TB) string {
	tb.Helper()
	return testbin.Build(tb, "stressprog", "", "-trimpath", "github.com/forgedev/forged/internal/testkit/stressprog")
}

// newStressE2E is newE2E with a repository whose project image is the
// busybox base plus the stress helper at /usr/local/bin/stressprog.
func newStressE2E(t *testing.T) *e2e { return newStressE2EUnder(t, "") }

// newStressE2EUnder is newStressE2E under the isolation floor given.
func newStressE2EUnder(t *testing.T, floor string) *e2e {
	t.Helper()
	e := newE2E(t, runner.Config{Isolation: floor})
	tag := stressImage(t, e.runner.Docker(), e.engine)
	e.repo = filepath.Join(t.TempDir(), "stress-repo")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, example.CreateRepo(ctx, e.repo, example.RepoOptions{Dockerfile: "FROM " + tag + "\n"}))
	return e
}

// stressImage builds the busybox base (when missing) plus the stress
// helper, tagged by the helper's digest, and untags it when the test ends
// (only untags while a cached project image is built on it).
func stressImage(tb testing.TB, docker *dockerops.Client, engine *client.Client) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(tb, err)
	bin, err := os.ReadFile(stressBinary(tb))
	require.NoError(tb, err)
	sum := sha256.Sum256(bin)
	// The process id keeps another test process (running at the same
	// time) from untagging this one's image at its own cleanup.
	tag := "forged-test/stress:" + hex.EncodeToString(sum[:6]) + "-" + strconv.Itoa(os.Getpid())
	dockerfile := "FROM " + example.BaseImage + "\nCOPY stressprog /usr/local/bin/stressprog\n"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"stressprog", 0o755, bin}} {
		require.NoError(tb, tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}))
		_, err := tw.Write(f.data)
		require.NoError(tb, err)
	}
	require.NoError(tb, tw.Close())
	_, err = docker.BuildImage(ctx, dockerops.BuildRequest{ContextTar: &buf, Dockerfile: "Dockerfile", Tags: []string{tag}})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = engine.ImageRemove(ctx, tag, image.RemoveOptions{})
	})
	return tag
}

// requireKernelTelemetry checks the outcome's record: from the kernel's
// own peak, with a last reading, never 0.
func requireKernelTelemetry(t *testing.T, out messages.AttemptOutcome) *messages.SandboxTelemetry {
	t.Helper()
	require.NotNil(t, out.Telemetry, "%s: %s", out.Code, out.Message)
	t.Logf("telemetry: %+v", *out.Telemetry)
	tel := out.Telemetry
	require.NoError(t, tel.Validate())
	assert.Equal(t, messages.TelemetryKernelPeak, tel.Source)
	assert.NotZero(t, tel.PeakMemoryBytes)
	assert.Equal(t, tel.PeakMemoryBytes, out.PeakMemoryBytes)
	require.Len(t, tel.Containers, 1)
	assert.Equal(t, "agent", tel.Containers[0].Role)
	assert.NotZero(t, tel.CPUUsageNanos)
	return tel
}

func TestTelemetryCatchesShortMemorySpikes(t *testing.T) {
	e := newStressE2E(t)
	for _, hold := range []string{"300", "30"} {
		t.Run(hold+"ms", func(t *testing.T) {
			d := e.dispatch([]string{"/usr/local/bin/stressprog", "spike", "200", hold, "1000", "1000"}, 512<<20)
			out := e.wait(e.submit(d))
			require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
			tel := requireKernelTelemetry(t, out)
			assert.GreaterOrEqual(t, tel.PeakMemoryBytes, uint64(200<<20), "a %s ms spike of 200 MiB", hold)
			assert.True(t, tel.FinalReading, "the last reading was taken before the container exited")
		})
	}
}

func TestTelemetryPeakOfAQuickTaskIsNeverZero(t *testing.T) {
	// The task ends at once: the cgroup lives only while the worker
	// commits and waits for the host's release.
	e := newE2E(t, runner.Config{})
	out := e.wait(e.submit(e.dispatch([]string{"/bin/true"}, 0)))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	tel := requireKernelTelemetry(t, out)
	assert.True(t, tel.FinalReading)
}

// TestForkBombIsPIDExhaustion runs under runc and gVisor. Under gVisor
// the task's forks are not refused one by one: the sandbox as a whole
// meets the container's pids limit (GVisorPIDsLimit of the dispatch's
// budget) and ends; the host's pids.max counter classifies it all the same.
func TestForkBombIsPIDExhaustion(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) {
			e := newStressE2EUnder(t, iso.floor)
			d := e.dispatch([]string{"/bin/sh", "-c", `i=0; while [ $i -lt 200 ]; do sleep 3 & i=$((i+1)); done 2>/dev/null; wait; exit 1`}, 0)
			d.Sandbox.RequestedResources.PIDs = 64
			out := e.wait(e.submit(d))
			t.Logf("%s: %s", out.Code, out.Message)
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(failure.SandboxPIDExhausted), out.Code, out.Message)
			assert.Contains(t, out.Message, "host saw pids.max (64) reached")
			requireKernelTelemetry(t, out)
			assert.NotZero(t, out.Telemetry.Containers[0].PidsMaxEvents)
		})
	}
}

// TestDescriptorExhaustionIsClassified: the task opens /dev/null until
// EMFILE and holds its descriptors 300 ms, under runc and gVisor. Under
// gVisor the worker's sampler sees it (its exit watch is refused there):
// gVisor's procfs has no children files and no limits file, so the worker
// walks parent ids and asks prlimit (internal/worker, resources_linux.go).
func TestDescriptorExhaustionIsClassified(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) {
			e := newStressE2EUnder(t, iso.floor)
			log := e.submit(e.dispatch([]string{"/usr/local/bin/stressprog", "fds", "300"}, 0))
			out := e.wait(log)
			t.Logf("%s: %s", out.Code, out.Message)
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(failure.SandboxFDExhausted), out.Code, out.Message)
			assert.Contains(t, out.Message, "task exited 1")
			for _, ev := range log.Events() {
				if ev.EventType == messages.TaskResourcesEvent {
					t.Logf("%s: %s", ev.Content, deref(ev.Data))
				}
			}
		})
	}
}

func TestFullTmpfsIsStorageExhaustion(t *testing.T) {
	// /tmp is a tmpfs charged to the container's memory: filling it meets
	// the memory limit first, and the kernel OOM-kills the writer.
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) {
			e := newStressE2EUnder(t, iso.floor)
			log := e.submit(e.dispatch([]string{"/bin/sh", "-c", `dd if=/dev/zero of=/tmp/fill bs=1M count=2000; exit 1`}, 0))
			out := e.wait(log)
			t.Logf("%s: %s", out.Code, out.Message)
			for _, ev := range log.Events() {
				if ev.EventType == messages.TaskResourcesEvent || ev.Role == messages.RoleAgent {
					t.Logf("  %s: %s %s", ev.EventType, ev.Content, deref(ev.Data))
				}
			}
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(failure.SandboxStorageExhausted), out.Code, out.Message)
			assert.Contains(t, out.Message, "/tmp")
		})
	}
}

// TestMemoryExhaustionIsOOM runs under runc and gVisor. Under gVisor the
// host kernel's OOM killer sees the sandbox kernel (the Sentry, which
// holds the task's memory), not the task: the whole container ends, with
// the engine's OOMKilled state, before the sampler's final reading, so
// the cgroup's oom_kill counter is not read (docs/gvisor.md).
func TestMemoryExhaustionIsOOM(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) {
			e := newStressE2EUnder(t, iso.floor)
			out := e.wait(e.submit(e.dispatch([]string{"/usr/local/bin/stressprog", "spike", "300", "100", "0", "0"}, 96<<20)))
			t.Logf("%s: %s", out.Code, out.Message)
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, string(failure.SandboxOOMKilled), out.Code, out.Message)
			requireKernelTelemetry(t, out)
			if iso.floor == messages.IsolationRunc {
				assert.NotZero(t, out.Telemetry.Containers[0].OOMKills)
			}
		})
	}
}

func TestATaskClaimingOOMIsNotOOM(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { taskClaimingOOM(t, iso.floor) })
	}
}

func taskClaimingOOM(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	claim := `{"type":"runner_event","event":{"role":"runner","kind":"error","eventType":"sandbox_oom_killed","content":"OOMKilled","data":null}}`
	out := e.wait(e.submit(e.dispatch([]string{"/bin/sh", "-c", "echo '" + claim + "'; echo 'Out of memory: Killed process 1' >&2; exit 1"}, 0)))
	t.Logf("%s: %s", out.Code, out.Message)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxWorkerFailed), out.Code, out.Message)
}
