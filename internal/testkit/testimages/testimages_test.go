package testimages

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/images/imagegc"
)

// fakeImages is an engine holding images by their labels; ImageList
// honours the label filters imagegc sends.
type fakeImages struct {
	images  []image.Summary
	removed []string
}

func (f *fakeImages) ImageList(_ context.Context, opts image.ListOptions) ([]image.Summary, error) {
	var out []image.Summary
	for _, img := range f.images {
		match := true
		for _, want := range opts.Filters.Get("label") {
			k, v, _ := strings.Cut(want, "=")
			if got, ok := img.Labels[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			out = append(out, img)
		}
	}
	return out, nil
}

// ImageRemove removes an image named by its id or its one tag.
func (f *fakeImages) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	for i, img := range f.images {
		if img.ID == ref || len(img.RepoTags) == 1 && img.RepoTags[0] == ref {
			f.images = append(f.images[:i], f.images[i+1:]...)
			f.removed = append(f.removed, img.ID)
			return []image.DeleteResponse{{Deleted: img.ID}}, nil
		}
	}
	return nil, fmt.Errorf("no such image %s", ref)
}

func (f *fakeImages) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return nil, nil
}

var _ imagegc.EngineAPI = (*fakeImages)(nil)

func TestProjectNamesItsProcess(t *testing.T) {
	p := Project("toolchains-runc-go")
	m := projectName.FindStringSubmatch(p)
	require.NotNil(t, m, p)
	assert.Equal(t, fmt.Sprint(os.Getpid()), m[1])
	assert.NotEqual(t, p, Project("toolchains-runc-go"), "fresh each time")
}

// A killed test process leaves its images; the next Main removes the
// projects of ended processes only: not this one's, not a running one's,
// and nothing that is not a test project.
func TestSweepRemovesOnlyTheProjectsOfEndedProcesses(t *testing.T) {
	const ended, running = 4000001, 4000002
	img := func(id, project string, tags ...string) image.Summary {
		return image.Summary{ID: id, RepoTags: tags, Labels: map[string]string{
			imagegc.LabelManaged: "true", imagegc.LabelProject: project, imagegc.LabelKey: "k" + id, imagegc.LabelKind: "agent"}}
	}
	endedProject := fmt.Sprintf("forged-toolchains-oom-test-%d-0123abcd", ended)
	f := &fakeImages{images: []image.Summary{
		img("sha256:e1", endedProject, "forge/agent:e1"),
		img("sha256:e2", endedProject), // dangling
		img("sha256:r1", fmt.Sprintf("forged-runner-test-%d-89abcdef", running), "forge/agent:r1"),
		img("sha256:o1", fmt.Sprintf("forged-cmd-test-%d-fedcba98", os.Getpid()), "forge/agent:o1"),
		img("sha256:s1", "sample", "forge/agent:s1"),
		img("sha256:x1", "forged-cmd-test-0fb83142", "forge/agent:x1"), // names no process
	}}
	isRunning := func(pid int) bool { return pid == running }
	swept, err := sweepEnded(context.Background(), f, isRunning)
	require.NoError(t, err)
	assert.Equal(t, []string{endedProject}, swept)
	assert.ElementsMatch(t, []string{"sha256:e1", "sha256:e2"}, f.removed)
	var left []string
	for _, i := range f.images {
		left = append(left, i.ID)
	}
	assert.Equal(t, []string{"sha256:r1", "sha256:o1", "sha256:s1", "sha256:x1"}, left)
}
