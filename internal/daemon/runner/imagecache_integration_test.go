package runner_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/messages"
)

// Finding 9 of issue 28: a cache hit needed only the forge/agent:<key>
// tag, so a foreign image carrying it ran as the sandbox. After a first
// attempt builds the key, its tag is moved to a foreign image (the busybox
// base, which has no worker); the next attempt must not use it: it builds
// again, runs, and the tag is back on an image labelled with the key.
func TestEndToEndForeignImageWithTheKeysTagIsRebuilt(t *testing.T) {
	e := newE2E(t, runner.Config{})
	repo := filepath.Join(t.TempDir(), "repo-foreign")
	require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nLABEL foreign=" + example.NewUUID() + "\n",
	}))
	e.repo = repo
	first := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out := e.wait(first)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%+v", out)
	var miss struct {
		CacheKey string `json:"cacheKey"`
	}
	require.NoError(t, json.Unmarshal([]byte(*waitForEvent(t, first, "sandbox_image_cache_miss").Data), &miss))
	_, agentTag := dockerops.SandboxImageTags(miss.CacheKey)
	require.NoError(t, e.engine.ImageTag(t.Context(), example.BaseImage, agentTag))
	t.Cleanup(func() { // the foreign tag, if the attempt left it on the base image
		ctx := context.WithoutCancel(t.Context())
		if img, err := e.engine.ImageInspect(ctx, agentTag); err == nil && slices.Contains(img.RepoTags, example.BaseImage) {
			_, _ = e.engine.ImageRemove(ctx, agentTag, image.RemoveOptions{})
		}
	})

	second := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out = e.wait(second)
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(second))
	ev := waitForEvent(t, second, "sandbox_image_cache_miss")
	assert.Contains(t, string(*ev.Data), `"foreignImage":true`)
	img, err := e.engine.ImageInspect(t.Context(), agentTag)
	require.NoError(t, err)
	assert.Equal(t, miss.CacheKey, img.Config.Labels["dev.forge.image-key"], "the tag is back on forged's image")
	base, err := e.engine.ImageInspect(t.Context(), example.BaseImage)
	require.NoError(t, err)
	assert.NotEqual(t, base.ID, img.ID)
}
