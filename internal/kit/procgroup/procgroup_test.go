package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))

	assert.NoError(t, CheckExecutable("test helper", exe))
	for path, want := range map[string]string{
		"helper":                     `test helper "helper": must be a clean absolute path`,
		dir + "/./helper":            "must be a clean absolute path",
		filepath.Join(dir, "absent"): "test helper: stat ",
		plain:                        "test helper " + plain + ": not an executable regular file",
		dir:                          "not an executable regular file",
	} {
		assert.ErrorContains(t, CheckExecutable("test helper", path), want, "%s", path)
	}
}

func TestCappedOutputKeepsUpToItsLimitAndOverflowsOnce(t *testing.T) {
	calls := 0
	c := NewCappedOutput(8, func() { calls++ })
	n, err := c.Write([]byte("12345"))
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	_, err = c.Write([]byte("678"))
	require.NoError(t, err, "exactly the limit fits")
	_, err = c.Write([]byte("9"))
	assert.ErrorIs(t, err, ErrOutputLimit)
	_, err = c.Write(nil)
	assert.ErrorIs(t, err, ErrOutputLimit, "every write after an overflow is refused")
	out, overflow := c.Result()
	assert.Equal(t, "12345678", string(out))
	assert.True(t, overflow)
	assert.Equal(t, 1, calls, "onOverflow is called once")
	out[0] = 'x'
	again, _ := c.Result()
	assert.Equal(t, "12345678", string(again), "the result is a copy")

	quiet := NewCappedOutput(1, nil)
	_, err = quiet.Write([]byte("ab"))
	assert.ErrorIs(t, err, ErrOutputLimit, "a nil onOverflow is allowed")
	out, overflow = quiet.Result()
	assert.Empty(t, out)
	assert.True(t, overflow)
}

func TestHelperEnvPassesOnlyItsOwn(t *testing.T) {
	t.Setenv("HOME", "/home/x")
	t.Setenv("TMPDIR", "/tmp/x")
	t.Setenv("FORGED_SECRET", "s")
	assert.Equal(t, []string{"PATH=" + HelperPath, "LC_ALL=C", "A=1", "HOME=/home/x", "TMPDIR=/tmp/x"}, HelperEnv("A=1"))
}

// RunHelper kills what the helper left in its group, and DescribeExit
// renders how it ended.
func TestRunHelperKillsItsGroupAndDescribesTheExit(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.CommandContext(t.Context(), "/bin/sh", "-c", `sleep 300 >/dev/null 2>&1 & echo $! >"$0"; exit 3`, pidFile)
	err := RunHelper(cmd)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, "exit status 3", DescribeExit(exit))
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	// The killed child is a zombie of the shell's (gone) group until init
	// reaps it; either way it no longer runs.
	assert.Eventually(t, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z ")
	}, 10*time.Second, 10*time.Millisecond, "the helper's background child still runs")

	killed := exec.CommandContext(t.Context(), "/bin/sh", "-c", "kill -9 $$")
	require.ErrorAs(t, RunHelper(killed), &exit)
	assert.Equal(t, "killed by signal killed", DescribeExit(exit))
}
