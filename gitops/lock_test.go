package gitops

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockHelperEnv makes the test binary act as another process holding a
// repository lock (see TestMain): "<stateRoot>\n<repoPath>".
const lockHelperEnv = "GITOPS_TEST_LOCK_HELPER"

// lockHelperMain takes the lock, says "locked" and holds it until stdin
// closes.
func lockHelperMain() int {
	stateRoot, repo, _ := strings.Cut(os.Getenv(lockHelperEnv), "\n")
	release, err := AcquireRepoLock(context.Background(), stateRoot, repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := release(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestRepoLockSerialisesGoroutines(t *testing.T) {
	t.Parallel()
	state, repo := t.TempDir(), t.TempDir()
	var inside, done atomic.Int32
	var overlap atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				release, err := AcquireRepoLock(testCtx(t), state, repo)
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) > 1 {
					overlap.Store(true)
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				done.Add(1)
				assert.NoError(t, release())
			}
		}()
	}
	wg.Wait()
	assert.False(t, overlap.Load(), "two holders at once")
	assert.Equal(t, int32(10), done.Load())
}

func TestRepoLockCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	state, repo := t.TempDir(), t.TempDir()
	release, err := AcquireRepoLock(testCtx(t), state, repo)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = AcquireRepoLock(ctx, state, repo)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, release())
	require.NoError(t, release(), "release is idempotent")
	again, err := AcquireRepoLock(testCtx(t), state, repo)
	require.NoError(t, err)
	require.NoError(t, again())
}

func TestRepoLockIsPerRepository(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	a, err := AcquireRepoLock(testCtx(t), state, t.TempDir())
	require.NoError(t, err)
	defer a()
	b, err := AcquireRepoLock(testCtx(t), state, t.TempDir())
	require.NoError(t, err)
	require.NoError(t, b())
}

func TestRepoLockPathSpellingsShareLock(t *testing.T) {
	t.Parallel()
	state, base := t.TempDir(), t.TempDir()
	repo := filepath.Join(base, "repo")
	require.NoError(t, os.Mkdir(repo, 0o755))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(repo, link))

	release, err := AcquireRepoLock(testCtx(t), state, repo)
	require.NoError(t, err)
	defer release()
	for _, spelling := range []string{repo + "/.", link, filepath.Join(base, "x", "..", "repo")} {
		ctx, cancel := context.WithTimeout(testCtx(t), 60*time.Millisecond)
		_, err := AcquireRepoLock(ctx, state, spelling)
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded, spelling)
	}
}

func TestRepoLockExcludesOtherProcesses(t *testing.T) {
	t.Parallel()
	state, repo := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+state+"\n"+repo)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	ctx, cancel := context.WithTimeout(testCtx(t), 150*time.Millisecond)
	defer cancel()
	_, err = AcquireRepoLock(ctx, state, repo)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, stdin.Close()) // the helper releases and exits
	release, err := AcquireRepoLock(testCtx(t), state, repo)
	require.NoError(t, err)
	require.NoError(t, release())
}
