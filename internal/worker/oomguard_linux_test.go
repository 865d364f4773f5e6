//go:build linux

package worker

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// TestOOMGuardsStandBesideTheTask starts the real worker binary's OOM
// guards: each runs at oom_score_adj 1000 in a process group of its own,
// is the worker's child but not counted as a task process, and
// killStragglers ends and reaps it.
func TestOOMGuardsStandBesideTheTask(t *testing.T) {
	guards := startOOMGuards(workerbin.Path(t), oomGuards)
	t.Cleanup(killStragglers)
	require.Len(t, guards, oomGuards)
	for pid := range guards {
		dir := "/proc/" + strconv.Itoa(pid)
		deadline := time.Now().Add(30 * time.Second)
		for {
			raw, err := os.ReadFile(dir + "/oom_score_adj")
			require.NoError(t, err, "guard %d", pid)
			if strings.TrimSpace(string(raw)) == "1000" {
				break
			}
			require.True(t, time.Now().Before(deadline), "guard %d never raised its oom_score_adj: %q", pid, raw)
			time.Sleep(10 * time.Millisecond)
		}
		pgid, err := unix.Getpgid(pid)
		require.NoError(t, err)
		assert.Equal(t, pid, pgid, "guard %d leads its own process group", pid)
	}
	procs, others := taskProcesses(guards)
	assert.Empty(t, procs, "the guards are not task processes")
	assert.Equal(t, oomGuards, others, "but they are counted (pids.max)")
	procs, _ = taskProcesses(nil)
	assert.Len(t, procs, oomGuards, "the walk sees them as the worker's children")

	killStragglers()
	for pid := range guards {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		assert.True(t, os.IsNotExist(err), "guard %d is gone and reaped", pid)
	}
}
