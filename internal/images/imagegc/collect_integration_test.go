package imagegc

import (
	"archive/tar"
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

func buildLabelled(t *testing.T, ctx context.Context, docker *dockerops.Client, raw *client.Client, project, key, tag string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte("FROM " + example.BaseImage + "\nLABEL nonce=" + ids.NewUUID() + "\n")
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "Dockerfile", Size: int64(len(df)), Mode: 0o644}))
	_, err := tw.Write(df)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	id, err := docker.BuildImage(ctx, dockerops.BuildRequest{ContextTar: &buf, Tags: []string{tag}, Labels: map[string]string{
		LabelManaged: "true", LabelProject: project, LabelKey: key, LabelKind: "agent",
	}})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, ref := range []string{tag, id} {
			_, _ = raw.ImageRemove(context.WithoutCancel(ctx), ref, image.RemoveOptions{PruneChildren: true})
		}
	})
	return id
}

// A collection keeps the key an attempt uses, the image a container uses
// and the project's newest key, removes the expired rest and the project's
// dangling images; a dry run removes nothing. The test scopes every
// collection to its own project label: other images on the engine are not
// its to remove.
func TestIntegrationCollect(t *testing.T) {
	raw := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer func() { _ = docker.Close() }()
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)

	project := "gc-test-" + ids.NewUUID()[:8]
	repo := "forged-test/" + project
	stale := buildLabelled(t, ctx, docker, raw, project, "key-e", repo+":rebuilt")
	rebuilt := buildLabelled(t, ctx, docker, raw, project, "key-e", repo+":rebuilt")
	require.NotEqual(t, stale, rebuilt, "the first build of key-e is now dangling")
	inUse := buildLabelled(t, ctx, docker, raw, project, "key-d", repo+":in-use")
	used := buildLabelled(t, ctx, docker, raw, project, "key-c", repo+":used")
	old := buildLabelled(t, ctx, docker, raw, project, "key-b", repo+":old")
	newest := buildLabelled(t, ctx, docker, raw, project, "key-a", repo+":newest") // built last; wins ties by key

	c, err := raw.ContainerCreate(ctx, &container.Config{Image: used, Cmd: []string{"true"}, Labels: map[string]string{"dev.forge.test": project}}, nil, nil, nil, "")
	require.NoError(t, err)
	defer func() {
		_ = raw.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	}()

	req := Request{InUse: map[string]bool{"key-d": true}, Policy: Policy{KeepPerProject: 1, MaxAge: time.Minute},
		Now: time.Now().Add(time.Hour), Project: project, DryRun: true}
	dry, err := Collect(ctx, raw, req)
	require.NoError(t, err)
	ids := func(ds []Decision) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	assert.ElementsMatch(t, []string{old, rebuilt}, ids(dry.Removed), "%+v", dry)
	require.Len(t, dry.Dangling, 1)
	assert.Equal(t, stale, dry.Dangling[0].ID)
	for _, id := range []string{old, stale, rebuilt} {
		_, err := raw.ImageInspect(ctx, id)
		assert.NoError(t, err, "a dry run removes nothing")
	}

	req.DryRun = false
	report, err := Collect(ctx, raw, req)
	require.NoError(t, err)
	assert.Empty(t, report.Failed)
	assert.ElementsMatch(t, []string{old, rebuilt}, ids(report.Removed))
	for _, id := range []string{old, stale, rebuilt} {
		_, err := raw.ImageInspect(ctx, id)
		assert.Error(t, err, "%s removed", id)
	}
	for _, id := range []string{inUse, used, newest} {
		_, err := raw.ImageInspect(ctx, id)
		assert.NoError(t, err, "%s kept", id)
	}
}
