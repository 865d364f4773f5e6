package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// TestUpgradedDaemonKeepsTheImageCache runs one attempt with a daemon
// stamped 1.0.0 and the next with a rebuilt daemon stamped 1.1.0, both
// beside the same forged-worker, on one state root: the second attempt is
// an image cache hit for the image the first one built, under the same
// key, and no image is built again.
func TestUpgradedDaemonKeepsTheImageCache(t *testing.T) {
	engine := enginetest.Client(t)
	older := enginetest.ForgedBinaryVersion(t, "1.0.0-upgrade-test")
	newer := enginetest.ForgedBinaryVersion(t, "1.1.0-upgrade-test")
	require.NotEqual(t, fileSum(t, older), fileSum(t, newer), "the two daemon builds are the same binary")
	for forged, version := range map[string]string{older: "1.0.0-upgrade-test", newer: "1.1.0-upgrade-test"} {
		out, err := exec.Command(forged, "--version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), version)
	}
	ensureBaseImage(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	repo := filepath.Join(base, "repo")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A Dockerfile of this run's own: no earlier run built its image.
	dockerfile := "FROM " + example.BaseImage + "\nLABEL dev.forge.upgrade-test=" + ids.NewUUID() + "\n"
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{Dockerfile: dockerfile}))

	first := runVersionedAttempt(t, engine, older, stateRoot, lockRoot, runnerID, repo, "forge/upgrade-1")
	require.Contains(t, first.types, "sandbox_image_cache_miss")
	require.Contains(t, first.types, "sandbox_build_started")
	require.Equal(t, "sandbox_image_built", first.image.EventType)
	require.False(t, first.image.CacheHit)
	built := imagesKeyed(t, engine, first.image.CacheKey)
	require.Len(t, built, 2, "the project image and the agent overlay")
	require.Contains(t, built, first.image.ImageDigest)

	second := runVersionedAttempt(t, engine, newer, stateRoot, lockRoot, runnerID, repo, "forge/upgrade-2")
	assert.Equal(t, "sandbox_image_cache_hit", second.image.EventType)
	assert.True(t, second.image.CacheHit)
	assert.Equal(t, first.image.CacheKey, second.image.CacheKey, "the upgrade changed the image key")
	assert.Equal(t, first.image.ImageDigest, second.image.ImageDigest)
	for _, build := range []string{"sandbox_image_cache_miss", "sandbox_build_started", "sandbox_image_built"} {
		assert.NotContains(t, second.types, build)
	}
	assert.Equal(t, built, imagesKeyed(t, engine, first.image.CacheKey), "the upgraded daemon built an image")
}

// imageEvent is the data of the event that names the attempt's image.
type imageEvent struct {
	EventType   string `json:"-"`
	ImageDigest string `json:"imageDigest"`
	CacheKey    string `json:"cacheKey"`
	CacheHit    bool   `json:"cacheHit"`
}

// attemptRun is what `forged run --json` printed of one attempt.
type attemptRun struct {
	types []string
	image imageEvent
}

// runVersionedAttempt runs one attempt of the repository on branch with
// `forged run --json` of the given build and checks that it succeeded.
func runVersionedAttempt(t *testing.T, engine *client.Client, forged, stateRoot, lockRoot, runnerID, repo, branch string) attemptRun {
	t.Helper()
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo})
	require.NoError(t, err)
	d.Lease.WorktreeKey = branch
	require.NoError(t, d.Validate())
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dispatch.json")
	require.NoError(t, os.WriteFile(path, raw, 0o600))

	cmd := exec.Command(forged, "run", "--json", "--allow-rootful", "--host-reserved-cores", "0", "--state-root", stateRoot, path)
	cmd.Env = append(os.Environ(), "TMPDIR="+lockRoot)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())

	var run attemptRun
	var outcome *messages.AttemptOutcome
	scanner := bufio.NewScanner(&stdout)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Event   *messages.Event          `json:"event"`
			Outcome *messages.AttemptOutcome `json:"outcome"`
		}
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line), scanner.Text())
		if line.Outcome != nil {
			outcome = line.Outcome
		}
		if line.Event == nil {
			continue
		}
		run.types = append(run.types, line.Event.EventType)
		if (line.Event.EventType == "sandbox_image_built" || line.Event.EventType == "sandbox_image_cache_hit") && line.Event.Data != nil {
			require.NoError(t, json.Unmarshal([]byte(*line.Event.Data), &run.image))
			run.image.EventType = line.Event.EventType
		}
	}
	require.NotNil(t, outcome, "no outcome; events %v", run.types)
	require.Equal(t, messages.StatusSucceeded, outcome.Status, "%s: %s", outcome.Code, outcome.Message)
	require.NotEmpty(t, run.image.EventType, "no image event; events %v", run.types)
	return run
}

// imagesKeyed lists the ids of the images built for a cache key.
func imagesKeyed(t *testing.T, engine *client.Client, key string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.forge.image-key="+key))})
	require.NoError(t, err)
	var out []string
	for _, img := range list {
		out = append(out, img.ID)
	}
	slices.Sort(out)
	return out
}

// fileSum is the sha256 of the file at path.
func fileSum(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(raw)
}
