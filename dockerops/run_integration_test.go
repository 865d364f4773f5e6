package dockerops

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/versions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func TestIntegrationConnect(t *testing.T) {
	c := requireEngine(t)
	assert.NotEmpty(t, c.APIVersion())
	assert.False(t, versions.LessThan(c.APIVersion(), "1.41"), c.APIVersion())
}

func TestIntegrationRunAttached(t *testing.T) {
	script := strings.Join([]string{
		`echo "first line"`,
		`cat /control/input/hello.txt`,
		`printf 'stdin:'; cat; echo`,
		`echo "uid=$(id -u) gid=$(id -g) pwd=$(pwd)"`,
		`stat -c '%n %u:%g %a' /workspace /control /control/input /control/output /home/forge /run/forge-secrets /control/input/hello.txt /opt/forge/forged /home /run`,
		`touch /rootfs-write 2>/dev/null && echo "rootfs writable" || echo "rootfs read-only"`,
		`touch /run/forge-secrets/x 2>/dev/null && echo "secrets writable" || echo "secrets read-only"`,
		`touch /control/output/x /workspace/x /tmp/x /run/forge/x && echo "scratch writable"`,
		`echo "attempt=$FORGE_DISPATCH_ATTEMPT_ID home=$HOME"`,
		`printf 'no newline at end'`,
		`echo "oops" >&2`,
		`exit 3`,
	}, "\n")
	s := provision(t, script, nil)
	ctx := testCtx(t)
	hello := []byte("hello from the host\n")
	require.NoError(t, s.c.CopyFileInto(ctx, s.container, "/control/input", "hello.txt", bytes.NewReader(hello), int64(len(hello)), messages.WorkerUID, messages.WorkerGID, 0o640))

	lines, res, err := s.run(t, ctx, "packet-data", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.False(t, res.OutputTruncated)
	assert.Equal(t, "oops\n", res.Stderr)
	want := []string{
		"first line",
		"hello from the host",
		"stdin:packet-data",
		"uid=10001 gid=10001 pwd=/workspace",
		"/workspace 10001:10001 755",
		"/control 10001:10001 755",
		"/control/input 10001:10001 755",
		"/control/output 10001:10001 755",
		"/home/forge 10001:10001 700", // the task's HOME is private
		"/run/forge-secrets 10001:10001 755",
		"/control/input/hello.txt 10001:10001 640",
		"/opt/forge/forged 0:0 555",
		"/home 0:0 755",
		"/run 0:0 755",
		"rootfs read-only",
		"secrets read-only",
		"scratch writable",
		"attempt=" + s.d.AttemptID() + " home=/home/forge",
		"no newline at end",
	}
	assert.Equal(t, want, lines)

	state, err := s.c.InspectState(ctx, s.container)
	require.NoError(t, err)
	assert.Equal(t, ContainerState{ExitCode: 3, Status: "exited"}, state)
}

func TestIntegrationRunMissingEntrypoint(t *testing.T) {
	// docker-init is PID 1: a missing worker binary is an exit, not a start
	// failure.
	s := provision(t, "", func(spec *WorkerSpec) { spec.Entrypoint = []string{"/no/such/binary"} })
	_, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 127, res.ExitCode)
	assert.Contains(t, res.Stderr, "/no/such/binary")
}

func TestIntegrationRunStartFailure(t *testing.T) {
	s := provisionIsolated(t, "echo never")
	// Without its network the container cannot start.
	require.NoError(t, s.c.raw.NetworkRemove(testCtx(t), s.network.ID))
	_, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxWorkerFailed, failure.CodeOf(err), err)
	assert.Contains(t, err.Error(), "container start")
	assert.Equal(t, -1, res.ExitCode)
}

func TestIntegrationRunCancelStopsContainer(t *testing.T) {
	s := provision(t, "echo started; sleep 120; echo never", nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	begin := time.Now()
	var lines []string
	_, err := s.c.RunAttached(ctx, s.container, nil, func(line []byte) error {
		lines = append(lines, string(line))
		cancel()
		return nil
	}, RunLimits{StopGrace: time.Second})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(begin), 30*time.Second)
	assert.Equal(t, []string{"started"}, lines)
	state, err := s.c.InspectState(testCtx(t), s.container)
	require.NoError(t, err)
	assert.False(t, state.Running)
	assert.Equal(t, "exited", state.Status)
}

func TestIntegrationRunCallbackErrorStopsContainer(t *testing.T) {
	s := provision(t, "echo one; echo two; sleep 120", nil)
	stop := errors.New("stop here")
	var lines []string
	_, err := s.c.RunAttached(testCtx(t), s.container, nil, func(line []byte) error {
		lines = append(lines, string(line))
		if string(line) == "two" {
			return stop
		}
		return nil
	}, RunLimits{StopGrace: time.Second})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, []string{"one", "two"}, lines)
	state, err := s.c.InspectState(testCtx(t), s.container)
	require.NoError(t, err)
	assert.False(t, state.Running)
}

func TestIntegrationRunOutputLimit(t *testing.T) {
	s := provision(t, "while true; do echo 0123456789012345678901234567890123456789; done", nil)
	count := 0
	res, err := s.c.RunAttached(testCtx(t), s.container, nil, func([]byte) error { count++; return nil },
		RunLimits{MaxStdoutBytes: 64 << 10, StopGrace: time.Second})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxLogLimit, failure.CodeOf(err), err)
	assert.True(t, res.OutputTruncated)
	assert.Positive(t, count)
	assert.LessOrEqual(t, count, (64<<10)/41)
	state, err := s.c.InspectState(testCtx(t), s.container)
	require.NoError(t, err)
	assert.False(t, state.Running)
}

func TestIntegrationOOMKilled(t *testing.T) {
	// The shell keeps the whole expansion in memory: far more than 64 MiB.
	s := provision(t, `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo "survived ${#x}"`, func(spec *WorkerSpec) {
		spec.Resources.WorkerMemoryLimitBytes = messages.MinWorkerMemoryBytes
	})
	ctx := testCtx(t)
	lines, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	assert.Empty(t, lines)
	assert.NotEqual(t, 0, res.ExitCode)
	state, err := s.c.InspectState(ctx, s.container)
	require.NoError(t, err)
	assert.True(t, state.OOMKilled, "state %+v, stderr %q", state, res.Stderr)
}

func TestIntegrationMemoryUsage(t *testing.T) {
	// The loop keeps the shell (and its 20 MB variable) alive; a final
	// simple command would be exec'd in its place.
	s := provision(t, `x=$(head -c 20000000 /dev/zero | tr '\0' a); echo ready; while :; do sleep 1; done`, nil)
	done := errors.New("measured")
	var usage uint64
	_, err := s.c.RunAttached(testCtx(t), s.container, nil, func(line []byte) error {
		var err error
		usage, err = s.c.MemoryUsage(testCtx(t), s.container)
		if err != nil {
			return err
		}
		return done
	}, RunLimits{StopGrace: time.Second})
	require.ErrorIs(t, err, done)
	assert.Greater(t, usage, uint64(10<<20))
	assert.Less(t, usage, uint64(256<<20))
}
