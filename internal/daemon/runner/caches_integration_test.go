package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// cachesTask is a hostile task's look at its caches: the per-attempt npm
// cache must be empty, its own and writable (and, bounded, full at the
// operator's size); the read-only pip cache readable and impossible to
// write, remount, cover, rename or link out of. Every line goes to
// /workspace/caches.txt, which the attempt commits.
const cachesTask = `
npm=/home/forge/.npm; pip=/home/forge/.pip-cache
try() { if "$@" 2>/dev/null; then echo DONE; else echo refused; fi; }
{
echo "npm-entries=$(ls -A $npm | wc -l)"
echo "npm-owner=$(stat -c %u $npm)"
echo "npm-env=$npm_config_cache"
echo "npm-write=$(try sh -c "echo data > $npm/written")"
echo "npm-fill=$(dd if=/dev/zero of=$npm/fill bs=1M count=200 2>&1 | grep -c 'No space left')"
rm -f $npm/fill
echo "pip=$(cat $pip/http/entry)"
echo "pip-env=$PIP_CACHE_DIR"
echo "pip-overwrite=$(try sh -c "echo x > $pip/http/entry")"
echo "pip-create=$(try touch $pip/new)"
echo "pip-remove=$(try rm $pip/http/entry)"
echo "pip-remount=$(try mount -o remount,rw $pip)"
echo "pip-cover=$(try mount -t tmpfs none $pip)"
echo "pip-bind=$(try mount --bind /workspace $pip)"
echo "pip-symlink=$(try ln -s /workspace $pip/out)"
echo "pip-rename=$(try mv $pip /home/forge/.pip2)"
echo "pip-ro=$(grep " $pip " /proc/self/mountinfo | grep -c ' ro[ ,]')"
echo "xdg-cache-writable=$(try sh -c "mkdir -p /home/forge/.cache/go && touch /home/forge/.cache/go/probe")"
echo "pip-after=$(cat $pip/http/entry)"
} > /workspace/caches.txt 2>&1
`

func TestEndToEndCachesPerAttemptAndReadOnly(t *testing.T) {
	const cacheBytes = 64 << 20
	e := newE2E(t, runner.Config{CacheBytes: cacheBytes})
	bounded := e.runner.Preflight(t.Context()).Storage.Bounded()
	if !bounded && os.Getenv("CI") == "true" {
		t.Fatal("CI needs bounded volumes")
	}
	ctx := context.Background()

	// The operator warms the project's pip cache.
	pipVolume := caches.ProjectVolume(testProject, "pip")
	t.Cleanup(func() { _ = e.engine.VolumeRemove(context.Background(), pipVolume, true) })
	_, err := caches.Warm(ctx, e.engine, caches.WarmRequest{Project: testProject, Cache: "pip", Image: example.BaseImage,
		Command: []string{"/bin/sh", "-c", `mkdir "$PIP_CACHE_DIR/http" && echo warmed > "$PIP_CACHE_DIR/http/entry"`}})
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "forge.sandbox.yml"),
		[]byte("version: 1\nworkingDirectory: /workspace\ncaches:\n  - {name: npm, mode: per_attempt}\n  - {name: pip, mode: readonly}\n"), 0o644))
	e.git("add", "-A")
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "caches")

	d := e.dispatch([]string{"/bin/sh", "-c", cachesTask}, 0)
	log := e.submit(d)
	started := waitForEvent(t, log, "sandbox_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	assert.Contains(t, *started.Data, names.CacheVolume("npm"))
	assert.Contains(t, *started.Data, pipVolume)
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))

	got := map[string]string{}
	for _, line := range strings.Split(e.git("show", example.Branch+":caches.txt"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"npm-entries": "0", "npm-owner": strconv.Itoa(supervisor.DefaultUIDBase), "npm-env": "/home/forge/.npm", "npm-write": "DONE",
		"pip": "warmed", "pip-env": "/home/forge/.pip-cache",
		"pip-overwrite": "refused", "pip-create": "refused", "pip-remove": "refused", "pip-remount": "refused",
		"pip-cover": "refused", "pip-bind": "refused", "pip-symlink": "refused", "pip-rename": "refused",
		"pip-ro": "1", "xdg-cache-writable": "DONE", "pip-after": "warmed",
	}
	if bounded {
		want["npm-fill"] = "1" // ENOSPC at the operator's cache size
	}
	for k, v := range want {
		assert.Equal(t, v, got[k], "%s (all: %v)", k, got)
	}
	ev := waitForEvent(t, log, "sandbox_cache_policy")
	assert.Contains(t, *ev.Data, `"perAttempt":["npm"]`)
	assert.Contains(t, *ev.Data, `"readonly":["pip"]`)

	// The per-attempt cache went with the attempt (submit's cleanup also
	// checks nothing of the attempt is left); the project cache stays.
	_, err = e.engine.VolumeInspect(ctx, names.CacheVolume("npm"))
	assert.True(t, cerrdefs.IsNotFound(err), "the per-attempt cache volume is removed: %v", err)
	_, err = e.engine.VolumeInspect(ctx, pipVolume)
	assert.NoError(t, err, "the project cache outlives the attempt")
	images, _ := os.ReadDir(filepath.Join(e.stateRoot, quota.ImageDir))
	assert.Empty(t, images, "no bounded image is left")
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
	removed := false
	for _, a := range out.Cleanup.Actions {
		if a.ResourceID == names.CacheVolume("npm") && a.Outcome == "removed" {
			removed = true
		}
	}
	assert.True(t, removed, "the cleanup report names the cache volume: %+v", out.Cleanup.Actions)
}
