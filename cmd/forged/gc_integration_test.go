package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// forged gc prints its collection as JSON; scoped to a project nothing
// has built, a dry run lists nothing to remove.
func TestGCDryRunPrintsJSON(t *testing.T) {
	enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	out, err := exec.Command(forged, "gc", "--dry-run", "--lock-root", t.TempDir(), "--project", "gc-none-"+ids.NewUUID()[:8]).Output()
	require.NoError(t, err, "%s", out)
	var report imagegc.Report
	require.NoError(t, json.Unmarshal(out, &report), "%s", out)
	assert.True(t, report.DryRun)
	assert.Empty(t, report.Removed)
	assert.Empty(t, report.Kept)
}

// forged cache warm fills a project's read-only cache; forged gc lists it
// in a dry run, keeps it younger than --cache-max-age, and removes it once
// older.
func TestCacheWarmThenGC(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer func() { _ = docker.Close() }()
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)
	project := "gc-cache-" + ids.NewUUID()[:8]
	volumeName := caches.ProjectVolume(project, "npm")
	t.Cleanup(func() { _ = engine.VolumeRemove(context.Background(), volumeName, true) })

	cmd := exec.Command(forged, "cache", "warm", "--project", project, "--cache", "npm", "--image", example.BaseImage,
		"--", "/bin/sh", "-c", `echo fetched; echo pkg > "$npm_config_cache/index"`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s", out, stderr.String())
	var warm caches.WarmReport
	require.NoError(t, json.Unmarshal(out, &warm), "%s", out)
	assert.Equal(t, caches.WarmReport{Volume: volumeName, Project: project, Cache: "npm"}, warm)
	assert.Equal(t, "fetched\n", stderr.String(), "the command's output goes to stderr")

	out, err = exec.Command(forged, "cache", "warm", "--project", project, "--cache", "npm", "--image", example.BaseImage, "--", "/bin/false").Output()
	require.Error(t, err, "a failing warm-up fails the command")
	require.NoError(t, json.Unmarshal(out, &warm), "%s", out)
	assert.Equal(t, int64(1), warm.ExitCode)

	gc := func(args ...string) gcReport {
		t.Helper()
		out, err := exec.Command(forged, append([]string{"gc", "--lock-root", t.TempDir(), "--project", project}, args...)...).Output()
		require.NoError(t, err, "%s", out)
		var report gcReport
		require.NoError(t, json.Unmarshal(out, &report), "%s", out)
		return report
	}
	report := gc()
	assert.Empty(t, report.Caches.Removed, "younger than the default 14 days")
	assert.Equal(t, 1, report.Caches.Kept)
	report = gc("--dry-run", "--cache-max-age", "1ns")
	require.Len(t, report.Caches.Removed, 1)
	assert.Equal(t, volumeName, report.Caches.Removed[0].Name)
	_, err = engine.VolumeInspect(ctx, volumeName)
	require.NoError(t, err, "a dry run removes nothing")
	report = gc("--cache-max-age", "1ns")
	require.Len(t, report.Caches.Removed, 1)
	_, err = engine.VolumeInspect(ctx, volumeName)
	assert.True(t, cerrdefs.IsNotFound(err), "removed: %v", err)
}
