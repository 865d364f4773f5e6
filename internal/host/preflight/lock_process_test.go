package preflight

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const helperEnv = "FORGED_PREFLIGHT_LOCK_HELPER"

// TestContextLockHelperProcess is not a test: the competition tests run
// the test binary again as this helper. It tries the lock once, prints
// "acquired PID" or "refused CODE MESSAGE", and holds the lock until its
// stdin closes.
func TestContextLockHelperProcess(t *testing.T) {
	root := os.Getenv(helperEnv)
	if root == "" {
		return
	}
	l, err := AcquireContextLock(root, testContext)
	if err != nil {
		fmt.Printf("refused %s %v\n", failure.CodeOf(err), err)
		os.Exit(0)
	}
	fmt.Printf("acquired %d\n", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Release(); err != nil {
		fmt.Printf("release failed %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helper is one running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  chan string
}

func startHelper(t *testing.T, root string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestContextLockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, stdin: stdin, line: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "acquired ") || strings.HasPrefix(l, "refused ") {
				h.line <- l
			}
		}
		close(h.line)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

func (h *helper) result(t *testing.T) string {
	t.Helper()
	select {
	case l := <-h.line:
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("helper said nothing")
		return ""
	}
}

// stop closes stdin so that the helper releases and exits.
func (h *helper) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, h.stdin.Close())
	require.NoError(t, h.cmd.Wait())
}

// kill ends the helper without a release, like a crash.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, h.cmd.Process.Kill())
	_ = h.cmd.Wait()
}

func TestContextLockTwoProcessesCompete(t *testing.T) {
	root := t.TempDir()
	a, b := startHelper(t, root), startHelper(t, root)
	ra, rb := a.result(t), b.result(t)
	winner, lost := a, rb
	if strings.HasPrefix(rb, "acquired ") {
		winner, lost = b, ra
	}
	require.True(t, strings.HasPrefix(ra, "acquired ") != strings.HasPrefix(rb, "acquired "), "exactly one wins: %q / %q", ra, rb)
	wpid := winner.cmd.Process.Pid
	assert.Contains(t, lost, "refused docker_context_owned")
	assert.Contains(t, lost, fmt.Sprintf("forged pid %d", wpid))

	// This process loses too while the winner lives.
	_, err := AcquireContextLock(root, testContext)
	require.Error(t, err)
	assert.Equal(t, DockerContextOwned, failure.CodeOf(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", wpid))

	// The winner crashes: its record stays, naming a dead pid, and is taken
	// over.
	winner.kill(t)
	l, err := AcquireContextLock(root, testContext)
	require.NoError(t, err)
	require.NotNil(t, l.Previous())
	assert.Equal(t, wpid, l.Previous().PID)

	// Now another process is refused, naming this one.
	c := startHelper(t, root)
	refused := c.result(t)
	assert.True(t, strings.HasPrefix(refused, "refused docker_context_owned "), refused)
	assert.Contains(t, refused, fmt.Sprintf("Docker context %s is owned by forged pid %d", testContext, os.Getpid()))

	// After an orderly release the next process wins and releases cleanly.
	require.NoError(t, l.Release())
	d := startHelper(t, root)
	assert.Equal(t, fmt.Sprintf("acquired %d", d.cmd.Process.Pid), d.result(t))
	d.stop(t)
	_, recordPath := contextLockPaths(root, testContext)
	assert.NoFileExists(t, recordPath)
}
