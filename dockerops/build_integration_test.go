package dockerops

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/kit/ids"
)

// bridgeGateway is the host's address on the engine's default bridge: the
// first address of its subnet.
func bridgeGateway(t *testing.T, c *Client) string {
	t.Helper()
	nw, err := c.raw.NetworkInspect(testCtx(t), "bridge", network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, nw.IPAM.Config)
	if gw := nw.IPAM.Config[0].Gateway; gw != "" {
		return gw
	}
	prefix, err := netip.ParsePrefix(nw.IPAM.Config[0].Subnet)
	require.NoError(t, err)
	return prefix.Masked().Addr().Next().String()
}

// buildHostListener accepts connections on every host address and counts them.
func buildHostListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = conn.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

func buildTag(t *testing.T, name string) string {
	tag := testImagePrefix + name + ":" + ids.NewUUID()[:8]
	imagesMu.Lock()
	testImages = append(testImages, tag)
	imagesMu.Unlock()
	return tag
}

// A RUN step that connects to a listener on the host fails under the
// default build policy (no network: only lo exists); the same Dockerfile
// built on the bridge, the operator's explicit opt-in, reaches it, which
// shows the test can tell the two apart.
func TestIntegrationBuildHasNoNetwork(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	port, accepted := buildHostListener(t)
	gw := bridgeGateway(t, c)
	dockerfile := fmt.Sprintf("FROM %s\nRUN echo interfaces: $(ls /sys/class/net) && nc -w 5 %s %d </dev/null && echo reached-%s\n",
		base, gw, port, ids.NewUUID()[:8])

	var logs []string
	_, err := c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "nonet")},
		OnLog:      func(l string) { logs = append(logs, l) },
	})
	require.Error(t, err, strings.Join(logs, "\n"))
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), err)
	assert.Contains(t, logs, "interfaces: lo")
	assert.Zero(t, accepted.Load(), "the build reached the host")

	logs = nil
	_, err = c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "bridged")},
		Limits:     BuildLimits{Network: "bridge"},
		OnLog:      func(l string) { logs = append(logs, l) },
	})
	require.NoError(t, err, strings.Join(logs, "\n"))
	assert.Equal(t, int32(1), accepted.Load())
}

// A RUN step that grows without bound (busybox tail keeps a line-less
// input whole) is killed at the build's memory limit.
func TestIntegrationBuildMemoryLimit(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	dockerfile := fmt.Sprintf("FROM %s\nRUN echo %s && tail /dev/zero\n", base, ids.NewUUID()[:8])
	start := time.Now()
	_, err := c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "oom")},
		Limits:     BuildLimits{MemoryBytes: 48 << 20, Timeout: 2 * time.Minute},
	})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "exceeded the build memory limit of 48 MiB")
	assert.Less(t, time.Since(start), 2*time.Minute, "killed by the memory limit, not the timeout")
}

// TestIntegrationBuildLimitsApplyInsideRUN reads, from inside a RUN step,
// the limits the classic builder applied to its container: open files
// (soft and hard), memory and memory+swap (from the container's own
// cgroup, v1 or v2) and the size of /dev/shm. The engine removes the
// step's container, so this is where they can be seen.
func TestIntegrationBuildLimitsApplyInsideRUN(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	const memory = 600 << 20
	dockerfile := fmt.Sprintf("FROM %s\nRUN echo %s; "+
		"echo nofile=$(ulimit -Sn)/$(ulimit -Hn); "+
		"echo memory=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes); "+
		"echo swap=$(cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || echo unknown); "+
		"echo shm=$(df -k /dev/shm | tail -n 1 | awk '{print $2}')\n", base, ids.NewUUID()[:8])
	var logs []string
	_, err := c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "limits")},
		Limits:     BuildLimits{MemoryBytes: memory, NoFile: 1024, Timeout: 2 * time.Minute},
		OnLog:      func(l string) { logs = append(logs, l) },
	})
	require.NoError(t, err, strings.Join(logs, "\n"))
	t.Logf("seen inside the RUN step: %q", logs)
	assert.Contains(t, logs, "nofile=1024/1024")
	assert.Contains(t, logs, fmt.Sprintf("memory=%d", memory))
	// No swap beyond the memory: v1 counts memory and swap together
	// (memsw = memory), v2 the swap alone (0).
	assert.Subset(t, []string{fmt.Sprintf("swap=%d", memory), "swap=0", "swap=unknown"}, []string{swapLine(logs)})
	assert.Contains(t, logs, fmt.Sprintf("shm=%d", buildShmSize>>10), "256 MiB of /dev/shm")
}

// swapLine is the swap= line of a build log.
func swapLine(logs []string) string {
	for _, l := range logs {
		if strings.HasPrefix(l, "swap=") {
			return l
		}
	}
	return ""
}

func TestIntegrationBuildTimeout(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	dockerfile := fmt.Sprintf("FROM %s\nRUN echo %s && sleep 120\n", base, ids.NewUUID()[:8])
	_, err := c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "slow")},
		Limits:     BuildLimits{Timeout: 3 * time.Second},
	})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "the build exceeded its timeout of 3s")
}

// A secret a RUN step prints is redacted in the lines handed on and in the
// failure message's log tail.
func TestIntegrationBuildLogRedacted(t *testing.T) {
	c := requireEngine(t)
	base := baseImage(t)
	secret := "attempt-secret-" + ids.NewUUID()[:12]
	dockerfile := fmt.Sprintf("FROM %s\nRUN echo leaking %s; echo GITHUB_TOKEN=ghx%s >&2; echo https://bob:pw%s@example.invalid/; exit 3\n",
		base, secret, secret[:9], secret[:5])
	var logs []string
	_, err := c.BuildImage(testCtx(t), BuildRequest{
		ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
		Tags:       []string{buildTag(t, "leak")},
		OnLog:      func(l string) { logs = append(logs, l) },
		Redact:     buildlog.NewRedactor(secret).Redact,
	})
	require.Error(t, err)
	all := strings.Join(logs, "\n")
	for _, text := range []string{all, err.Error()} {
		assert.NotContains(t, text, secret)
		assert.NotContains(t, text, "ghx")
		assert.NotContains(t, text, "bob:pw")
	}
	assert.Contains(t, all, "leaking "+buildlog.Redacted)
	assert.Contains(t, all, "GITHUB_TOKEN="+buildlog.Redacted)
}

// The classic builder takes no PIDs limit: forged gives the build a cgroup
// parent with pids.max. A RUN step that starts 300 sleepers together is
// refused forks under a limit of 128, and the same step passes without
// one, which shows the test can tell the two apart. The parent is gone
// after the build.
func TestIntegrationBuildPIDsLimit(t *testing.T) {
	requireEngine(t)
	base := baseImage(t)
	// A client of its own runner: its build cgroups are named after it.
	runner := ids.NewUUID()
	c, err := Connect(testCtx(t), Options{Retry: RetryPolicy{MaxAttempts: 2},
		BuildCgroups: cgroups.NewBuildCgroups(cgroups.Locator{}, runner)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	mine := "/sys/fs/cgroup/*/forged-build-" + strings.ReplaceAll(runner, "-", "") + "-*"
	build := func(tag string, pids int64) ([]string, error) {
		// A fresh first line each time: never a cached layer.
		dockerfile := fmt.Sprintf("FROM %s\nRUN echo %s; i=0; while [ $i -lt 300 ]; do sleep 10 & i=$((i+1)); done; wait; echo all-forked\n", base, ids.NewUUID()[:8])
		var logs []string
		_, err := c.BuildImage(testCtx(t), BuildRequest{
			ContextTar: tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil),
			Tags:       []string{buildTag(t, tag)},
			Limits:     BuildLimits{PIDs: pids, Timeout: 3 * time.Minute},
			OnLog:      func(l string) { logs = append(logs, l) },
		})
		return logs, err
	}
	logs, err := build("pids", 128)
	if failure.CodeOf(err) == failure.SandboxBuildPolicy {
		t.Skipf("this host cannot bound a classic build's PIDs: %v", err)
	}
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), err)
	assert.Contains(t, strings.Join(logs, "\n"), "can't fork", "forks were refused at pids.max")
	assert.NotContains(t, logs, "all-forked")
	left, err := filepath.Glob(mine)
	require.NoError(t, err)
	assert.Empty(t, left, "the build's cgroup parent is removed from every hierarchy the engine created it in")

	logs, err = build("nopids", 0)
	require.NoError(t, err, strings.Join(logs, "\n"))
	assert.Contains(t, logs, "all-forked")
}
