package caches

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// busybox returns the engine and the example busybox image (built once,
// cached on purpose like the other shared test images).
func busybox(t *testing.T) (*client.Client, string) {
	t.Helper()
	engine := enginetest.Client(t) // skips, or fails under CI, without an engine
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer func() { _ = docker.Close() }()
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)
	return engine, example.BaseImage
}

func testProject() string { return "forged-caches-test-" + ids.NewUUID()[:8] }

// removeVolumes removes the test's own cache volumes (those of project).
func removeVolumes(t *testing.T, engine *client.Client, project string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		vols, err := List(ctx, engine, project)
		require.NoError(t, err)
		for _, v := range vols {
			if err := engine.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %s: %v", v.Name, err)
			}
		}
	})
}

// runAsWorker runs script in image as the worker's uid with the volume
// mounted where the worker sees it, and returns its standard output.
func runAsWorker(t *testing.T, engine *client.Client, image, volumeName, target, script string, readOnly bool) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := engine.ContainerCreate(ctx, &container.Config{Image: image, User: "10001:10001", Entrypoint: []string{"/bin/sh", "-c", script}},
		&container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volumeName, Target: target, ReadOnly: readOnly, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}},
		nil, nil, "")
	require.NoError(t, err)
	defer func() {
		_ = engine.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	}()
	waitCh, errCh := engine.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	require.NoError(t, engine.ContainerStart(ctx, created.ID, container.StartOptions{}))
	var code int64
	select {
	case res := <-waitCh:
		code = res.StatusCode
	case err := <-errCh:
		t.Fatal(err)
	}
	logs, err := engine.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	defer logs.Close()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, io.Discard, logs)
	require.NoError(t, err)
	return out.String(), code
}

func TestWarmFillsTheProjectCacheWhichTheWorkerCanOnlyRead(t *testing.T) {
	engine, image := busybox(t)
	project := testProject()
	removeVolumes(t, engine, project)
	ctx := context.Background()

	var output bytes.Buffer
	report, err := Warm(ctx, engine, WarmRequest{Project: project, Cache: "pip", Image: image, Output: &output,
		Command: []string{"/bin/sh", "-c", `mkdir -p "$PIP_CACHE_DIR/http" && echo warmed > "$PIP_CACHE_DIR/http/entry" && echo "warm-up as $(id -u)"`}})
	require.NoError(t, err, output.String())
	assert.Equal(t, ProjectVolume(project, "pip"), report.Volume)
	assert.Zero(t, report.ExitCode)
	assert.Contains(t, output.String(), "warm-up as 0", "the command's output reaches the operator")

	inspected, err := engine.VolumeInspect(ctx, report.Volume)
	require.NoError(t, err)
	assert.Equal(t, ProjectLabels(project, "pip"), inspected.Labels)

	// The worker's uid reads it, and cannot write it: neither through the
	// read-only mount, nor where a mount were read-write (the files and
	// directories are root's).
	probe := `cat /home/forge/.pip-cache/http/entry; for f in http/entry new; do if echo x > /home/forge/.pip-cache/$f; then echo WROTE $f; fi; done; stat -c '%u %a' /home/forge/.pip-cache/http/entry /home/forge/.pip-cache`
	for _, readOnly := range []bool{true, false} {
		out, code := runAsWorker(t, engine, image, report.Volume, "/home/forge/.pip-cache", probe, readOnly)
		assert.Zero(t, code, out)
		assert.Equal(t, "warmed\n0 644\n0 755\n", out, "read-only mount: %v", readOnly)
	}

	// A second warm-up adds to the same volume.
	_, err = Warm(ctx, engine, WarmRequest{Project: project, Cache: "pip", Image: image,
		Command: []string{"/bin/sh", "-c", `echo again > "$PIP_CACHE_DIR/second"`}})
	require.NoError(t, err)
	out, _ := runAsWorker(t, engine, image, report.Volume, "/home/forge/.pip-cache", "cat /home/forge/.pip-cache/http/entry /home/forge/.pip-cache/second", true)
	assert.Equal(t, "warmed\nagain\n", out)

	// The warm-up container is gone.
	left := enginetest.Labelled(t, engine, LabelWarmup+"="+report.Volume)
	assert.Empty(t, left)
}

func TestWarmFailuresAreReported(t *testing.T) {
	engine, image := busybox(t)
	project := testProject()
	removeVolumes(t, engine, project)
	ctx := context.Background()

	report, err := Warm(ctx, engine, WarmRequest{Project: project, Cache: "npm", Image: image, Command: []string{"/bin/sh", "-c", "exit 3"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited 3")
	assert.Equal(t, int64(3), report.ExitCode)

	// No network unless asked for: the warm-up sees only loopback.
	var output bytes.Buffer
	_, err = Warm(ctx, engine, WarmRequest{Project: project, Cache: "npm", Image: image, Output: &output,
		Command: []string{"/bin/sh", "-c", "ls /sys/class/net"}})
	require.NoError(t, err)
	assert.Equal(t, "lo\n", output.String())

	// A volume of the cache's name that is not this project's cache is
	// never used.
	squatter := ProjectVolume(project, "cargo")
	_, err = engine.VolumeCreate(ctx, volume.CreateOptions{Name: squatter, Labels: map[string]string{LabelCache: "cargo", "dev.forge.project": project}})
	require.NoError(t, err)
	_, err = Warm(ctx, engine, WarmRequest{Project: project, Cache: "cargo", Image: image, Command: []string{"/bin/true"}})
	require.Error(t, err)
	assert.True(t, cerrdefs.IsConflict(err), err.Error())

	for _, bad := range []WarmRequest{
		{Project: project, Cache: "maven", Image: image, Command: []string{"/bin/true"}},
		{Project: project, Cache: "npm", Image: image},
		{Project: project, Cache: "npm", Image: image, Command: []string{"/bin/true"}, Network: "host"},
		{Cache: "npm", Image: image, Command: []string{"/bin/true"}},
	} {
		_, err := Warm(ctx, engine, bad)
		assert.Error(t, err, "%+v", bad)
	}
}

func TestCollectRemovesOldCacheVolumesAndDryRunRemovesNothing(t *testing.T) {
	engine, image := busybox(t)
	project := testProject()
	removeVolumes(t, engine, project)
	ctx := context.Background()

	names := []string{ProjectVolume(project, "npm"), ProjectVolume(project, "pip")}
	for i, name := range names {
		_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: ProjectLabels(project, []string{"npm", "pip"}[i])})
		require.NoError(t, err)
	}
	// A volume of the project without the cache label is not a cache.
	other := "forge-cache-test-other-" + ids.NewUUID()[:8]
	_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: other, Labels: map[string]string{"dev.forge.project": project}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = engine.VolumeRemove(context.Background(), other, true) })

	vols, err := List(ctx, engine, project)
	require.NoError(t, err)
	require.Len(t, vols, 2)
	created := vols[len(vols)-1].Created
	require.False(t, created.IsZero())
	maxAge := 14 * 24 * time.Hour

	// The manual clock: young at created+maxAge, old a second later.
	report, err := Collect(ctx, engine, GCRequest{MaxAge: maxAge, Now: created.Add(maxAge), Project: project})
	require.NoError(t, err)
	assert.Empty(t, report.Removed)
	assert.Equal(t, 2, report.Kept)

	old := created.Add(maxAge + time.Second)
	report, err = Collect(ctx, engine, GCRequest{MaxAge: maxAge, Now: old, Project: project, DryRun: true})
	require.NoError(t, err)
	assert.True(t, report.DryRun)
	assert.Len(t, report.Removed, 2, "the dry run lists both")
	vols, err = List(ctx, engine, project)
	require.NoError(t, err)
	assert.Len(t, vols, 2, "and removes nothing")

	// A volume a container uses stays.
	user, err := engine.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{"/bin/true"}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: names[0], Target: "/c", ReadOnly: true}}}, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = engine.ContainerRemove(context.Background(), user.ID, container.RemoveOptions{Force: true})
	})

	report, err = Collect(ctx, engine, GCRequest{MaxAge: maxAge, Now: old, Project: project})
	require.NoError(t, err)
	require.Len(t, report.Removed, 1)
	assert.Equal(t, names[1], report.Removed[0].Name)
	require.Len(t, report.Failed, 1, "the volume in use is reported, not removed")
	assert.Equal(t, names[0], report.Failed[0].Name)
	_, err = engine.VolumeInspect(ctx, names[1])
	assert.True(t, cerrdefs.IsNotFound(err), "removed")
	_, err = engine.VolumeInspect(ctx, names[0])
	assert.NoError(t, err, "in use, kept")
	_, err = engine.VolumeInspect(ctx, other)
	assert.NoError(t, err, "not a cache volume, never touched")

	_, err = Collect(ctx, engine, GCRequest{Now: old, Project: project})
	assert.Error(t, err, "a max age is required")
	assert.True(t, strings.Contains(err.Error(), "max age"))
}
