package dockerops

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
)

// TestIntegrationWriteViaExec pushes a lease update into the tmpfs
// /run/forge of a running, hardened worker container (read-only root
// filesystem, user 10001, no capabilities). The test image's
// /opt/forge/forged is busybox, which has no "worker lease-update"
// subcommand, so the write itself uses a shell stand-in through
// writeViaExec, and WriteLeaseUpdate shows how a failing command is
// reported.
func TestIntegrationWriteViaExec(t *testing.T) {
	script := `echo ready
while [ ! -e /run/forge/go ]; do sleep 0.05; done
base64 -w0 /run/forge/lease-update.json; echo
stat -c '%u:%g' /run/forge/lease-update.json
ls -A /run/forge
echo end
sleep 300`
	s := provision(t, script, nil)
	ctx := testCtx(t)
	update := append(testUpdate(t), '\n')
	standIn := []string{"/bin/sh", "-c", "cat > /run/forge/lease-update.json"}

	// The worker keeps running until the test has read everything (an
	// exec still running when its container exits would be killed); the
	// callback's error then stops it.
	seenAll := errors.New("seen all")
	var lines []string
	var execErrs []error
	_, err := s.c.RunAttached(ctx, s.container, nil, func(line []byte) error {
		if string(line) == "end" {
			return seenAll
		}
		lines = append(lines, string(line))
		if string(line) != "ready" {
			return nil
		}
		execErrs = append(execErrs,
			s.c.writeViaExec(ctx, s.container, standIn, update),
			s.c.WriteLeaseUpdate(ctx, s.container, update),
			s.c.writeViaExec(ctx, s.container, []string{"/bin/sh", "-c", "cat > /run/forge/go"}, []byte("go")))
		return nil
	}, RunLimits{StopGrace: time.Second})
	require.ErrorIs(t, err, seenAll)
	require.Len(t, execErrs, 3)
	require.NoError(t, execErrs[0])
	require.NoError(t, execErrs[2])

	// The real command does not exist in the test image: a non-zero exit,
	// reported with the command's output.
	require.Error(t, execErrs[1])
	assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(execErrs[1]), "%v", execErrs[1])
	assert.Contains(t, execErrs[1].Error(), "exit status 127")
	assert.Contains(t, execErrs[1].Error(), "applet not found")

	require.Len(t, lines, 5, "%q", lines)
	assert.Equal(t, "ready", lines[0])
	got, err := base64.StdEncoding.DecodeString(lines[1])
	require.NoError(t, err)
	assert.Equal(t, update, got, "the exact bytes landed")
	_, err = lease.DecodeUpdate(got)
	require.NoError(t, err)
	assert.Equal(t, "10001:10001", lines[2], "written as the worker user")
	assert.Equal(t, []string{"go", "lease-update.json"}, lines[3:])

	// Once the worker has exited there is nothing to push into.
	err = s.c.WriteLeaseUpdate(ctx, s.container, update)
	require.Error(t, err)
	assert.True(t, cerrdefs.IsConflict(err) || errors.Is(err, cerrdefs.ErrConflict), "%v", err)
	assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(err))
}

// TestIntegrationReleaseWorker sends the release signal to a running,
// hardened worker container: the container's init forwards it to the
// worker (here a shell trapping it), which then exits 0. Once the
// container has exited, a release is an error.
func TestIntegrationReleaseWorker(t *testing.T) {
	script := `trap 'echo released; exit 0' USR1
echo ready
while :; do sleep 0.05; done`
	s := provision(t, script, nil)
	ctx := testCtx(t)

	var lines []string
	var releaseErr error
	res, err := s.c.RunAttached(ctx, s.container, nil, func(line []byte) error {
		lines = append(lines, string(line))
		if string(line) == "ready" {
			releaseErr = s.c.ReleaseWorker(ctx, s.container)
		}
		return nil
	}, RunLimits{StopGrace: time.Second})
	require.NoError(t, err)
	require.NoError(t, releaseErr)
	assert.Equal(t, 0, res.ExitCode, "the worker exits on its release, not on a stop (%s)", res.Stderr)
	assert.Equal(t, []string{"ready", "released"}, lines)

	err = s.c.ReleaseWorker(ctx, s.container)
	require.Error(t, err)
	assert.Equal(t, failure.SandboxRuntimeFailed, failure.CodeOf(err), "%v", err)
}
