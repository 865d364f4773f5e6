//go:build linux && (amd64 || arm64)

package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// TestTaskShimHoldsTheTaskForTheWatch runs the real worker binary's task
// shim on this host: the task inherits oom_score_adj 1000, and the worker,
// holding the filter's listener, looks while the kernel holds the task
// (ExitWatch; the task's O_TRUNC open, unlink and exit are all watched, the
// test checks only that one look happened). With the filter returning
// ALLOW instead of USER_NOTIF the test fails.
func TestTaskShimHoldsTheTaskForTheWatch(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := workerbin.Path(t)
	dir := t.TempDir()
	watch := startResourceWatch(nil, dir)
	mine, theirs, err := shimSocket()
	require.NoError(t, err)
	out, err := os.Create(filepath.Join(dir, "out"))
	require.NoError(t, err)
	defer out.Close()
	script := `cat /proc/self/oom_score_adj; echo x > ` + dir + `/f; : > ` + dir + `/f; rm ` + dir + `/f; exit 3`
	cmd := exec.Command(bin, "worker", TaskExecCommand, "/bin/sh", "sh", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{theirs}
	require.NoError(t, cmd.Start())
	closeAll(theirs)
	r := &run{watch: watch, stderr: out}
	stop := r.startWatch(mine)
	require.NotNil(t, stop, "the shim installed no watch")
	err = cmd.Wait()
	stop()
	report := watch.finish(true, cmd.ProcessState.ExitCode())
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 3, exitErr.ExitCode())
	raw, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	assert.Equal(t, "1000", strings.TrimSpace(string(raw)), "the task inherits the shim's oom_score_adj")
	assert.True(t, report.ExitWatch, "the worker looked while the task was held")
}
