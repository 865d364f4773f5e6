package cgroups

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildParentV1(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	require.NoError(t, os.MkdirAll(f.dir("sys/fs/cgroup/pids"), 0o755))
	p, err := f.locator().NewBuildParent("forged-build-1", 512)
	require.NoError(t, err)
	assert.Equal(t, "/forged-build-1", p.Name, "the engine's CgroupParent")
	data, err := os.ReadFile(f.dir("sys/fs/cgroup/pids/forged-build-1/pids.max"))
	require.NoError(t, err)
	assert.Equal(t, "512", string(data))
	// Emptied (the engine removed the build's containers), it goes.
	require.NoError(t, os.Remove(f.dir("sys/fs/cgroup/pids/forged-build-1/pids.max")))
	require.NoError(t, p.Remove())
	assert.NoDirExists(t, f.dir("sys/fs/cgroup/pids/forged-build-1"))
	assert.NoError(t, p.Remove(), "removing twice is no error")
}

func TestBuildParentV2PassesTheRootsControllersDown(t *testing.T) {
	f := newFixture(t, mountinfoV2)
	f.write("sys/fs/cgroup/cgroup.subtree_control", "cpu memory pids\n")
	p, err := f.locator().NewBuildParent("forged-build-2", 128)
	require.NoError(t, err)
	ctl, err := os.ReadFile(f.dir("sys/fs/cgroup/forged-build-2/cgroup.subtree_control"))
	require.NoError(t, err)
	assert.Equal(t, "+cpu +memory +pids", string(ctl))
	max, err := os.ReadFile(f.dir("sys/fs/cgroup/forged-build-2/pids.max"))
	require.NoError(t, err)
	assert.Equal(t, "128", string(max))
	assert.Equal(t, "/forged-build-2", p.Name)
}

func TestBuildParentRefusals(t *testing.T) {
	f := newFixture(t, mountinfoV2)
	f.write("sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n")
	_, err := f.locator().NewBuildParent("forged-build-3", 128)
	require.ErrorContains(t, err, "pids controller is not enabled")
	assert.NoDirExists(t, f.dir("sys/fs/cgroup/forged-build-3"), "a failed parent is removed")

	// A cgroup namespace's mount does not expose the engine's root.
	ns := newFixture(t, strings.Replace(mountinfoV2, " / /sys/fs/cgroup ", " /user.slice /sys/fs/cgroup ", 1))
	_, err = ns.locator().NewBuildParent("forged-build-4", 128)
	require.ErrorContains(t, err, "at its root")

	for _, bad := range []struct {
		name string
		pids int64
	}{{"../escape", 128}, {"", 128}, {"Upper", 128}, {"ok", 0}} {
		_, err := f.locator().NewBuildParent(bad.name, bad.pids)
		assert.Error(t, err, "%+v", bad)
	}
}
