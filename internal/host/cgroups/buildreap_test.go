package cgroups

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/kit/ids"
)

func TestBuildCgroupsNamesAndRemovesInEveryHierarchy(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	require.NoError(t, os.MkdirAll(f.dir("sys/fs/cgroup/pids"), 0o755))
	runner := ids.NewUUID()
	p, err := NewBuildCgroups(f.locator(), runner).New(128)
	require.NoError(t, err)
	assert.Regexp(t, "^/forged-build-"+strings.ReplaceAll(runner, "-", "")+"-[0-9a-f]{32}$", p.Name)
	// The cgroupfs driver made the parent in the other hierarchies too.
	for _, h := range []string{"memory", "cpu", "unified"} {
		require.NoError(t, os.MkdirAll(f.dir("sys/fs/cgroup/"+h+p.Name), 0o755))
	}
	require.NoError(t, os.Remove(f.dir("sys/fs/cgroup/pids"+p.Name+"/pids.max")))
	require.NoError(t, p.Remove())
	for _, h := range []string{"pids", "memory", "cpu", "unified"} {
		assert.NoDirExists(t, f.dir("sys/fs/cgroup/"+h+p.Name))
	}

	unnamed, err := NewBuildCgroups(f.locator(), "").New(128)
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile("^/forged-build-[0-9a-f]{32}$"), unnamed.Name)
	got, err := NewBuildCgroups(f.locator(), "").Reap(false)
	require.NoError(t, err)
	assert.Equal(t, BuildCgroupReap{}, got, "unnamed build cgroups are nobody's to reap")
}

// TestBuildCgroupsReapSelects checks which of a fake host's cgroups a
// round would remove (a dry run: a fixture directory holding files cannot
// be removed like a cgroup).
func TestBuildCgroupsReapSelects(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	for _, h := range []string{"cpu", "cpuacct", "memory", "pids", "systemd", "unified"} {
		require.NoError(t, os.MkdirAll(f.dir("sys/fs/cgroup/"+h), 0o755))
	}
	runner := ids.NewUUID()
	b := NewBuildCgroups(f.locator(), runner)
	live, err := b.New(128)
	require.NoError(t, err)
	f.write("sys/fs/cgroup/pids"+live.Name+"/cgroup.procs", "")
	name := func(runner string) string {
		return "forged-build-" + strings.ReplaceAll(runner, "-", "") + "-" + strings.ReplaceAll(ids.NewUUID(), "-", "")
	}
	leftover, busy, child, unreadable := name(runner), name(runner), name(runner), name(runner)
	for _, h := range []string{"pids", "memory"} {
		f.write("sys/fs/cgroup/"+h+"/"+leftover+"/cgroup.procs", "")
		f.write("sys/fs/cgroup/"+h+"/"+busy+"/cgroup.procs", "")
		f.write("sys/fs/cgroup/"+h+"/"+child+"/cgroup.procs", "")
	}
	f.write("sys/fs/cgroup/memory/"+busy+"/cgroup.procs", "4242\n")
	f.write("sys/fs/cgroup/memory/"+child+"/0123456789ab/cgroup.procs", "")
	require.NoError(t, os.MkdirAll(f.dir("sys/fs/cgroup/pids/"+unreadable), 0o755))
	for _, foreign := range []string{name(ids.NewUUID()), "forged-build-" + strings.ReplaceAll(ids.NewUUID(), "-", ""), "docker", name(runner) + "0"} {
		f.write("sys/fs/cgroup/pids/"+foreign+"/cgroup.procs", "")
	}

	got, err := b.Reap(true)
	require.NoError(t, err)
	assert.Equal(t, []string{"/" + leftover}, got.WouldRemove)
	assert.Equal(t, []string{live.Name}, got.Live)
	assert.ElementsMatch(t, []string{"/" + busy, "/" + child, "/" + unreadable}, got.Busy)
	assert.Empty(t, got.Removed)
	assert.DirExists(t, f.dir("sys/fs/cgroup/pids/"+leftover), "a dry run removes nothing")
}

func TestBuildCgroupsReapWithoutProcfs(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	require.NoError(t, os.Remove(f.dir("proc/self/mountinfo")))
	got, err := NewBuildCgroups(f.locator(), ids.NewUUID()).Reap(false)
	require.NoError(t, err, "a host without procfs has no build cgroups")
	assert.Equal(t, BuildCgroupReap{}, got)
}
