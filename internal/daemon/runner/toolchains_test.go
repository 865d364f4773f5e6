package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/sandbox/toolchains"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// listerFunc is an ImageLister answering from a function.
type listerFunc func(image.ListOptions) ([]image.Summary, error)

func (f listerFunc) ImageList(_ context.Context, o image.ListOptions) ([]image.Summary, error) {
	return f(o)
}

// TestToolchainCheckNamesEachLabelledImage: the list asks the engine for
// the label only; each image is named by its label with its first tag in
// order (none for an untagged one), sorted by name; an image with an
// empty label is no toolchain; a failed list reports none.
func TestToolchainCheckNamesEachLabelledImage(t *testing.T) {
	var asked image.ListOptions
	check := ToolchainCheck(listerFunc(func(o image.ListOptions) ([]image.Summary, error) {
		asked = o
		return []image.Summary{
			{ID: "sha256:b", Labels: map[string]string{ToolchainLabel: "node"}, RepoTags: []string{"z/node:2", "forged-images/node:1"}},
			{ID: "sha256:a", Labels: map[string]string{ToolchainLabel: "go"}, RepoTags: []string{"<none>:<none>"}},
			{ID: "sha256:c", Labels: map[string]string{ToolchainLabel: ""}},
		}, nil
	}))
	got := check(context.Background())
	assert.Equal(t, []string{ToolchainLabel}, asked.Filters.Get("label"))
	assert.Equal(t, []preflight.ToolchainImage{
		{Name: "go", ImageID: "sha256:a"},
		{Name: "node", Ref: "forged-images/node:1", ImageID: "sha256:b"},
	}, got)

	failing := ToolchainCheck(listerFunc(func(image.ListOptions) ([]image.Summary, error) { return nil, errors.New("engine away") }))
	assert.Empty(t, failing(context.Background()))
}

// TestToolchainCheckListsTheEnginesToolchains: on the real engine, every
// image of scripts/images.sh's catalogue is listed under its name with
// its id (the images are built by scripts/test.sh; without them the test
// is skipped, or fails under CI=true).
func TestToolchainCheckListsTheEnginesToolchains(t *testing.T) {
	engine := enginetest.Client(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	images, path, err := toolchains.ReadCatalogue(root)
	if errors.Is(err, toolchains.ErrNoCatalogue) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err.Error())
	}
	require.NoError(t, err, path)
	got := map[string]preflight.ToolchainImage{}
	for _, tc := range ToolchainCheck(engine)(context.Background()) {
		got[tc.Name] = tc
	}
	for name, im := range images {
		if assert.Contains(t, got, name) {
			assert.Equal(t, im.ID, got[name].ImageID, name)
			assert.NotEmpty(t, got[name].Ref, name)
		}
	}
}
