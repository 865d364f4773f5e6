package reaper

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/cgroups"
)

// hostHierarchies are the directories of this host's cgroup hierarchies
// mounted at their root (where the engine's cgroupfs driver puts a
// build's parent).
func hostHierarchies(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	mounts, err := cgroups.ParseMountinfo(raw)
	require.NoError(t, err)
	var out []string
	for _, m := range mounts {
		if m.Root == "/" {
			out = append(out, m.Point)
		}
	}
	return out
}

// cgroupDirs are the directories of the cgroup name ("/forged-…") in the
// hierarchies that hold it.
func cgroupDirs(t *testing.T, hierarchies []string, name string) []string {
	t.Helper()
	var out []string
	for _, h := range hierarchies {
		d := filepath.Join(h, name)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// asTheEngine does what the cgroupfs driver does with a build's cgroup
// parent: it creates it in every hierarchy (forged created it in the
// pids one only). After the build, the engine removes its containers'
// cgroups, not the parent.
func asTheEngine(t *testing.T, hierarchies []string, name string) {
	t.Helper()
	for _, h := range hierarchies {
		if err := os.Mkdir(filepath.Join(h, name), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			require.NoError(t, err)
		}
	}
}

// removeCgroup removes what the test left of a cgroup, children first.
func removeCgroup(hierarchies []string, name string) {
	for _, h := range hierarchies {
		d := filepath.Join(h, name)
		if entries, err := os.ReadDir(d); err == nil {
			for _, e := range entries {
				if e.IsDir() {
					_ = os.Remove(filepath.Join(d, e.Name()))
				}
			}
		}
		_ = os.Remove(d)
	}
}

// TestIntegrationRoundReapsLeftoverBuildCgroups runs on this host's real
// cgroup tree (as root; skipped where a build cgroup cannot be created).
// A dead process of this runner left build cgroups the way a crash in
// the middle of a --build-pids build leaves them: the round removes the
// empty one from every hierarchy, and leaves alone one that still holds
// a process, one with a child cgroup (a build container), the parent of
// a build this process is running, another runner's, an unnamed one and
// a cgroup that only looks like a build's.
func TestIntegrationRoundReapsLeftoverBuildCgroups(t *testing.T) {
	w := newWorld(t)
	hierarchies := hostHierarchies(t)
	dead := cgroups.NewBuildCgroups(cgroups.Locator{}, w.runner)
	mine := cgroups.NewBuildCgroups(cgroups.Locator{}, w.runner)
	newParent := func(b *cgroups.BuildCgroups) string {
		t.Helper()
		p, err := b.New(128)
		if err != nil {
			t.Skipf("this host cannot create a build cgroup (forged as root beside a cgroupfs hierarchy mounted at its root): %v", err)
		}
		t.Cleanup(func() { removeCgroup(hierarchies, p.Name) })
		asTheEngine(t, hierarchies, p.Name)
		return p.Name
	}
	leftover := newParent(dead)
	withProcess := newParent(dead)
	withChild := newParent(dead)
	otherRunner := newParent(cgroups.NewBuildCgroups(cgroups.Locator{}, uuid()))
	unnamed := newParent(cgroups.NewBuildCgroups(cgroups.Locator{}, ""))
	lookalike := "/forged-build-" + strings.ReplaceAll(w.runner, "-", "") + "-not-a-build"
	asTheEngine(t, hierarchies, lookalike)
	t.Cleanup(func() { removeCgroup(hierarchies, lookalike) })

	sleeper := exec.Command("sleep", "600")
	require.NoError(t, sleeper.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = sleeper.Process.Kill()
			_ = sleeper.Wait()
		}
	}
	t.Cleanup(stop)
	procs := filepath.Join(cgroupDirs(t, hierarchies, withProcess)[0], "cgroup.procs")
	require.NoError(t, os.WriteFile(procs, []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644))
	child := filepath.Join(cgroupDirs(t, hierarchies, withChild)[0], "0123456789ab")
	require.NoError(t, os.Mkdir(child, 0o755))

	running, err := mine.New(128)
	require.NoError(t, err)
	t.Cleanup(func() { removeCgroup(hierarchies, running.Name) })
	asTheEngine(t, hierarchies, running.Name)

	cfg := w.config()
	cfg.BuildCgroups = mine
	dry := cfg
	dry.DryRun = true
	round := w.run(dry)
	require.NotNil(t, round.BuildCgroups)
	assert.Equal(t, []string{leftover}, round.BuildCgroups.WouldRemove)
	assert.Len(t, cgroupDirs(t, hierarchies, leftover), len(hierarchies), "a dry run removes nothing")

	round = w.run(cfg)
	require.NotNil(t, round.BuildCgroups)
	assert.Equal(t, []string{leftover}, round.BuildCgroups.Removed)
	assert.Empty(t, cgroupDirs(t, hierarchies, leftover), "the leftover is gone from every hierarchy")
	assert.ElementsMatch(t, []string{withProcess, withChild}, round.BuildCgroups.Busy)
	assert.Equal(t, []string{running.Name}, round.BuildCgroups.Live)
	for _, kept := range []string{withProcess, withChild, running.Name, otherRunner, unnamed, lookalike} {
		assert.Len(t, cgroupDirs(t, hierarchies, kept), len(hierarchies), "%s is left alone", kept)
	}

	// The build ends: its parent goes from every hierarchy the engine
	// created it in. The busy ones, emptied, go at the next round.
	require.NoError(t, running.Remove())
	assert.Empty(t, cgroupDirs(t, hierarchies, running.Name))
	stop()
	require.NoError(t, os.Remove(child))
	round = w.run(cfg)
	assert.ElementsMatch(t, []string{withProcess, withChild}, round.BuildCgroups.Removed)
	for _, gone := range []string{withProcess, withChild} {
		assert.Empty(t, cgroupDirs(t, hierarchies, gone))
	}
	for _, kept := range []string{otherRunner, unnamed, lookalike} {
		assert.Len(t, cgroupDirs(t, hierarchies, kept), len(hierarchies), "%s is left alone", kept)
	}
}
