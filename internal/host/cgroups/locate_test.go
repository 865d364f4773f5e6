package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const containerID = "db45314a0163eab85e7ddd3c5cba965c595c2a9fe16bebfedacde1b72cf181ff"

// fixture is a fake host: files under a temporary root, with procfs at
// <root>/proc and the cgroup mounts below <root>.
type fixture struct {
	t    *testing.T
	root string
}

func newFixture(t *testing.T, mountinfo string) *fixture {
	f := &fixture{t: t, root: t.TempDir()}
	f.write("proc/self/mountinfo", mountinfo)
	return f
}

func (f *fixture) write(rel, content string) {
	p := filepath.Join(f.root, filepath.FromSlash(rel))
	require.NoError(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(f.t, os.WriteFile(p, []byte(content), 0o644))
}

func (f *fixture) locator() Locator {
	return Locator{ProcRoot: filepath.Join(f.root, "proc"), Root: f.root}
}

func (f *fixture) dir(rel string) string { return filepath.Join(f.root, filepath.FromSlash(rel)) }

// The mount tables of a cgroup v1 host (as this machine's) and of a pure
// cgroup v2 host.
const (
	mountinfoV1 = `23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`
	mountinfoV2 = `23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
)

func procCgroupV1(p string) string {
	var b strings.Builder
	for i, c := range []string{"name=systemd", "pids", "blkio", "freezer", "devices", "memory", "cpuset", "cpuacct", "cpu"} {
		b.WriteString(strconv.Itoa(9-i) + ":" + c + ":" + p + "\n")
	}
	b.WriteString("0::" + p + "\n")
	return b.String()
}

func TestFindV1(t *testing.T) {
	for name, p := range map[string]string{
		"cgroupfs": "/docker/" + containerID,
		"systemd":  "/system.slice/docker-" + containerID + ".scope",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, mountinfoV1)
			f.write("proc/4242/cgroup", procCgroupV1(p))
			cg, err := f.locator().Find(4242, containerID)
			require.NoError(t, err)
			assert.Equal(t, V1, cg.Version)
			assert.Equal(t, p, cg.Path)
			assert.Equal(t, f.dir("sys/fs/cgroup/memory"+p), cg.Memory)
			assert.Equal(t, f.dir("sys/fs/cgroup/pids"+p), cg.Pids)
			assert.Equal(t, f.dir("sys/fs/cgroup/cpu"+p), cg.CPU)
			assert.Equal(t, f.dir("sys/fs/cgroup/cpuacct"+p), cg.CPUAcct)

			f.write("sys/fs/cgroup/memory"+p+"/memory.usage_in_bytes", "1048576\n")
			f.write("sys/fs/cgroup/memory"+p+"/memory.max_usage_in_bytes", "220200960\n")
			f.write("sys/fs/cgroup/memory"+p+"/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
			f.write("sys/fs/cgroup/pids"+p+"/pids.events", "max 17\n")
			f.write("sys/fs/cgroup/cpuacct"+p+"/cpuacct.usage", "26726077\n")
			f.write("sys/fs/cgroup/cpu"+p+"/cpu.stat", "nr_periods 10\nnr_throttled 3\nthrottled_time 5000000\n")
			r, err := cg.Read()
			require.NoError(t, err)
			assert.Equal(t, Reading{
				MemoryPeakBytes: 220200960, PeakKnown: true, MemoryUsageBytes: 1 << 20,
				OOMKills: 2, OOMKnown: true, PidsMaxEvents: 17, PidsKnown: true,
				CPUUsageNanos: 26726077, CPUThrottledNanos: 5000000, CPUKnown: true,
			}, r)
		})
	}
}

func TestFindV2(t *testing.T) {
	for name, p := range map[string]string{
		"cgroupfs": "/docker/" + containerID,
		"systemd":  "/system.slice/docker-" + containerID + ".scope",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, mountinfoV2)
			f.write("proc/77/cgroup", "0::"+p+"\n")
			cg, err := f.locator().Find(77, containerID)
			require.NoError(t, err)
			dir := f.dir("sys/fs/cgroup" + p)
			assert.Equal(t, Cgroup{Version: V2, Path: p, Memory: dir, Pids: dir, CPU: dir, CPUAcct: dir}, cg)

			f.write("sys/fs/cgroup"+p+"/memory.current", "4096\n")
			f.write("sys/fs/cgroup"+p+"/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n")
			f.write("sys/fs/cgroup"+p+"/pids.events", "max 0\n")
			f.write("sys/fs/cgroup"+p+"/cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\nnr_throttled 0\nthrottled_usec 7\n")
			r, err := cg.Read()
			require.NoError(t, err)
			assert.False(t, r.PeakKnown, "no memory.peak before Linux 5.19: the usage stands in, marked as such")
			assert.Equal(t, uint64(4096), r.MemoryPeakBytes)

			f.write("sys/fs/cgroup"+p+"/memory.peak", "209715200\n")
			r, err = cg.Read()
			require.NoError(t, err)
			assert.Equal(t, Reading{
				MemoryPeakBytes: 200 << 20, PeakKnown: true, MemoryUsageBytes: 4096,
				OOMKills: 1, OOMKnown: true, PidsMaxEvents: 0, PidsKnown: true,
				CPUUsageNanos: 1500000, CPUThrottledNanos: 7000, CPUKnown: true,
			}, r)
		})
	}
}

func TestFindUnderACgroupNamespace(t *testing.T) {
	// forged itself in a container with a private cgroup namespace: the
	// mount's root is a sub-tree, and paths outside it are not reachable.
	f := newFixture(t, "30 23 0:26 /docker/outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	f.write("proc/9/cgroup", "0::/docker/outer/docker/"+containerID+"\n")
	cg, err := f.locator().Find(9, containerID)
	require.NoError(t, err)
	assert.Equal(t, f.dir("sys/fs/cgroup/docker/"+containerID), cg.Memory)

	f.write("proc/10/cgroup", "0::/elsewhere/"+containerID+"\n")
	_, err = f.locator().Find(10, containerID)
	require.ErrorContains(t, err, "not mounted here")
}

func TestFindRefusesAReusedPid(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	f.write("proc/4242/cgroup", procCgroupV1("/user.slice/session-1.scope"))
	_, err := f.locator().Find(4242, containerID)
	require.ErrorIs(t, err, ErrNotContainer)
}

func TestFindFailures(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	_, err := f.locator().Find(0, containerID)
	require.Error(t, err)
	_, err = f.locator().Find(5, containerID)
	require.ErrorIs(t, err, os.ErrNotExist, "no such process")

	f.write("proc/6/cgroup", "0::/docker/"+containerID+"\n")
	g := newFixture(t, "23 1 0:21 / /sys rw - sysfs sysfs rw\n")
	g.write("proc/6/cgroup", "0::/docker/"+containerID+"\n")
	_, err = g.locator().Find(6, containerID)
	require.ErrorContains(t, err, "not mounted")

	cg := Cgroup{Version: V1, Memory: f.dir("gone")}
	_, err = cg.Read()
	require.ErrorIs(t, err, os.ErrNotExist, "the cgroup is gone once the container exited")
}

func TestNamesContainer(t *testing.T) {
	assert.True(t, NamesContainer("/docker/"+containerID, containerID))
	assert.True(t, NamesContainer("/system.slice/docker-"+containerID+".scope", containerID))
	assert.False(t, NamesContainer("/docker/"+containerID+"/child", containerID))
	assert.False(t, NamesContainer("/docker/"+containerID[:12], containerID))
	assert.False(t, NamesContainer("/", ""))
}

func TestParsers(t *testing.T) {
	_, err := ParseProcCgroup([]byte("x:memory:/a\n"))
	require.Error(t, err)
	_, err = ParseProcCgroup([]byte("4:memory:relative\n"))
	require.Error(t, err)
	_, err = ParseProcCgroup(nil)
	require.Error(t, err)
	_, err = ParseFlatKeyed([]byte("max -1\n"))
	require.Error(t, err)
	_, err = ParseFlatKeyed([]byte("nokey\n"))
	require.Error(t, err)
	v, err := ParseValue([]byte("max\n"))
	require.NoError(t, err)
	assert.Equal(t, ^uint64(0), v)
	_, err = ParseValue([]byte("99999999999999999999999"))
	require.Error(t, err)
	m, err := ParseMountinfo([]byte(`41 31 0:38 / /sys/fs/with\040space rw - cgroup cgroup rw,memory` + "\n"))
	require.NoError(t, err)
	assert.Equal(t, []Mount{{Version: V1, Root: "/", Point: "/sys/fs/with space", Controllers: []string{"memory"}}}, m)
	_, err = ParseMountinfo([]byte("1 2 3\n"))
	require.Error(t, err)
	_, err = ParseFlatKeyed([]byte(strings.Repeat("a 1\n", maxLines+1)))
	require.Error(t, err)
}

func TestReadsThisHost(t *testing.T) {
	// The real kernel: this process's own cgroup (not a container, so no
	// id check) must be readable wherever a memory hierarchy is mounted.
	cg, err := Locator{}.Find(os.Getpid(), "")
	if err != nil {
		t.Skipf("no cgroup memory hierarchy here: %v", err)
	}
	r, err := cg.Read()
	if err != nil {
		t.Skipf("own cgroup not readable: %v", err)
	}
	assert.NotZero(t, r.MemoryPeakBytes)
}

func TestOpenStatsTheContainersFileSystems(t *testing.T) {
	f := newFixture(t, mountinfoV1)
	f.write("proc/4242/cgroup", procCgroupV1("/docker/"+containerID))
	f.write("proc/4242/root/tmp/x", "")
	c, err := f.locator().Open(4242, containerID)
	require.NoError(t, err)
	u, err := c.StatFS("/tmp")
	require.NoError(t, err)
	assert.NotZero(t, u.Total)
	_, err = c.StatFS("/../../nowhere")
	require.Error(t, err, "the path stays under the container's root")
}
