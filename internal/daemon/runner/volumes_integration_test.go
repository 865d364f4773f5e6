package runner_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// Finding 3 of issue 28: an image ending in `VOLUME /data` gave the worker
// an anonymous volume there, writable past every bound, and left it on the
// engine after the attempt. The task writes 1 GiB to /data with a 256 MiB
// workspace and 512 MiB of memory: /data is now a tmpfs of the worker's
// scratch size (256 MiB), so the write stops short and the task (which
// succeeds only then) succeeds; no anonymous volume is left.
func TestEndToEndImageVolumeIsBoundedAndLeavesNothing(t *testing.T) {
	e := newE2E(t, runner.Config{})
	repo := filepath.Join(t.TempDir(), "repo-volume")
	require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nLABEL volume=" + example.NewUUID() + "\nVOLUME /data\n",
	}))
	e.repo = repo
	d := e.dispatch([]string{"/bin/sh", "-c",
		"grep -q ' /data tmpfs ' /proc/mounts || { echo '/data is not a tmpfs'; exit 3; }; " +
			"if dd if=/dev/zero of=/data/big bs=1M count=1024; then echo 'wrote 1 GiB to /data'; exit 4; fi; " +
			"test $(du -sm /data | cut -f1) -le 256 || exit 5"}, 512<<20)
	d.Sandbox.RequestedResources.WorkspaceBytes = 256 << 20
	log := e.submit(d)
	out := e.wait(log)
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(log))
	enginetest.AssertNoAnonymousVolumes(t, e.engine)
}
