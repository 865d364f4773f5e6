package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/messages"
)

// TestWriterPastItsQuotaIsStorageExhausted runs a task that writes 2 GiB
// into /workspace and then 2 GiB into /control/output against a 256 MiB
// workspace quota, on the real engine. The attempt fails with
// sandbox_storage_exhausted, found from the host's view of the volumes;
// while it runs, the attempt's images never take more of the host than the
// quota plus the documented slack (the control image); afterwards no image
// and no loop device is left. It runs under runc and gVisor (whose gofer
// writes to the same bounded volumes).
func TestWriterPastItsQuotaIsStorageExhausted(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); writerPastItsQuota(t, iso.floor) })
	}
}

func writerPastItsQuota(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	if report := e.runner.Preflight(t.Context()); !report.Storage.Bounded() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs bounded volumes: %s", report.Storage.Reason)
		}
		t.Skipf("volumes are not bounded here: %s", report.Storage.Reason)
	}
	const quotaBytes = 256 << 20
	d := e.dispatch([]string{"/bin/sh", "-c",
		"dd if=/dev/zero of=/workspace/big bs=1M count=2048; dd if=/dev/zero of=/control/output/big bs=1M count=2048; exit 1"}, 0)
	d.Sandbox.RequestedResources.WorkspaceBytes = quotaBytes

	images := filepath.Join(e.stateRoot, quota.ImageDir)
	var (
		mu   sync.Mutex
		peak int64
		seen = map[string]bool{}
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples how much of the host the images take
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			total := int64(0)
			entries, _ := os.ReadDir(images)
			for _, ent := range entries {
				var st unix.Stat_t
				if unix.Stat(filepath.Join(images, ent.Name()), &st) == nil && strings.HasSuffix(ent.Name(), ".img") {
					total += st.Blocks * 512
					mu.Lock()
					seen[ent.Name()] = true
					mu.Unlock()
				}
			}
			mu.Lock()
			peak = max(peak, total)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	log := e.submit(d)
	out := e.wait(log)
	close(stop)
	<-sampled

	require.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxStorageExhausted), out.Code, "%s; events: %v", out.Message, eventSummary(log))
	// Either fact names the workspace: the host's statfs of the task's
	// /workspace (when the sampler's last reading saw it full) or the
	// host's check of the bounded volume once the container exited.
	assert.Regexp(t, `host saw /workspace full|volume forge-[0-9a-f]+-workspace is full`, out.Message)
	// The kernel refused the writes past the quota: dd says ENOSPC.
	assert.Contains(t, strings.Join(eventSummary(log), "\n"), "No space left on device", "the task met ENOSPC")
	bundle := int64(1 << 20) // the sample repository's bundle is far smaller
	slack := quota.ControlBytes(bundle, quotaBytes)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("peak host allocation of the attempt's images: %d MiB (quota %d MiB + slack %d MiB)", peak>>20, quotaBytes>>20, slack>>20)
	assert.Len(t, seen, 2, "a workspace and a control image: %v", seen)
	assert.Greater(t, peak, int64(quotaBytes), "the task filled its workspace and more (else the test proves nothing)")
	assert.LessOrEqual(t, peak, int64(quotaBytes)+slack, "the host gave at most the quota plus the slack")

	entries, err := os.ReadDir(images)
	require.NoError(t, err)
	assert.Empty(t, entries, "the teardown removed the images")
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		raw, _ := os.ReadFile(b)
		assert.NotContains(t, string(raw), e.stateRoot, "a loop device is still bound to an image: %s", b)
	}
	require.NotNil(t, out.Cleanup)
	imagesReleased := 0
	for _, a := range out.Cleanup.Actions {
		if a.ResourceType == "volume_image" && a.Outcome == "removed" {
			imagesReleased++
		}
	}
	assert.Equal(t, 2, imagesReleased, "the cleanup report lists both images")
}
