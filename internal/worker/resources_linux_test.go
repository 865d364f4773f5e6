package worker

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// gVisor's procfs has no /proc/<pid>/task/<tid>/children and no
// /proc/<pid>/limits; the worker then walks parent ids and asks prlimit.
// Both fallbacks are checked here against the host kernel's own answers.

func TestDescendantsByParentFindsTheWholeTree(t *testing.T) {
	// sh starts a sleep in the background and waits: a child and a
	// grandchild of this test process.
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self := os.Getpid()
	var byChildren, byParent []int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) { // until sh has forked its sleep
		byChildren = descendants(self)
		if len(byChildren) >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Len(t, byChildren, 2, "the host kernel's children files: sh and its sleep")
	byParent = descendantsByParent(self)
	slices.Sort(byChildren)
	slices.Sort(byParent)
	assert.Equal(t, byChildren, byParent)
	assert.Contains(t, byParent, cmd.Process.Pid)
	assert.Empty(t, descendantsByParent(cmd.Process.Pid+1<<22), "a process that does not exist has no descendants")
}

func TestParseStatParentSkipsTheCommandName(t *testing.T) {
	ppid, ok := parseStatParent([]byte("42 (a) b (c) d) S 7 42 42 0 -1"))
	assert.True(t, ok)
	assert.Equal(t, 7, ppid)
	_, ok = parseStatParent([]byte("42 (truncated"))
	assert.False(t, ok)
}

func TestPrlimitOpenFilesIsTheSoftLimit(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "ulimit -n 321; exec sleep 30")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	dir := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && openFilesLimit(dir) != 321 { // until the ulimit ran
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 321, openFilesLimit(dir), "the limits file")
	assert.Equal(t, 321, prlimitOpenFiles(cmd.Process.Pid), "prlimit agrees with the limits file")
	var own unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &own))
	if own.Cur <= 1<<30 {
		assert.Equal(t, int(own.Cur), prlimitOpenFiles(os.Getpid()))
	}
	assert.Zero(t, prlimitOpenFiles(cmd.Process.Pid+1<<22), "no such process")
}
