package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// buildCgroups are the directories of the runner's build cgroups in every
// hierarchy (v1: /sys/fs/cgroup/<controller>/…; v2: /sys/fs/cgroup/…).
func buildCgroups(t *testing.T, runnerID string) []string {
	t.Helper()
	name := "forged-build-" + strings.ReplaceAll(runnerID, "-", "") + "-*"
	v1, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	require.NoError(t, err)
	v2, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", name))
	require.NoError(t, err)
	return append(v1, v2...)
}

// TestChaosKill9MidBuildLeavesNoBuildCgroup kills the daemon with SIGKILL
// while a RUN step of an image build runs under --build-pids: the build's
// cgroup parent is left behind, in every hierarchy. The restarted daemon's
// reaper removes it once the engine has removed the build's container.
func TestChaosKill9MidBuildLeavesNoBuildCgroup(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	if os.Geteuid() != 0 {
		t.Skip("--build-pids needs forged as root")
	}
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nRUN sleep 60\nLABEL chaos=" + example.NewUUID() + "\n"}))
	flags := []string{"--build-pids", "512", "--reaper-interval", "2s"}
	t.Cleanup(func() {
		// What a failed run left (an empty cgroup, the daemons gone).
		for _, dir := range buildCgroups(t, runnerID) {
			children, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs"))
			for _, c := range children {
				_ = os.Remove(filepath.Dir(c))
			}
			_ = os.Remove(dir)
		}
	})

	d := startDaemon(t, forged, stateRoot, lockRoot, flags...)
	dispatch, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "echo never"}})
	require.NoError(t, err)
	d.submit(dispatch)
	d.waitFor(dispatch.AttemptID(), "sandbox_build_started")
	// The RUN step's container runs inside the build's cgroup parent.
	require.Eventually(t, func() bool {
		for _, dir := range buildCgroups(t, runnerID) {
			if children, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs")); len(children) > 0 {
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the RUN step did not start under the build's cgroup parent")
	d.kill9()
	require.NotEmpty(t, buildCgroups(t, runnerID), "the crash leaves the build's cgroup parent")

	restarted := startDaemon(t, forged, stateRoot, lockRoot, flags...)
	defer restarted.stop()
	// The engine cancels the build of the gone client and removes its
	// container; the next round then finds the parent empty.
	require.Eventually(t, func() bool { return len(buildCgroups(t, runnerID)) == 0 },
		3*time.Minute, 200*time.Millisecond, "the reaper did not remove the dead build's cgroup parent")
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
}
