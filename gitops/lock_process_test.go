package gitops

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

// serialiseHelperEnv makes TestHelperProcess act as one of the processes
// of TestRepoLockSerialisesProcesses: "<name>\n<stateRoot>\n<repo>\n<log>".
const serialiseHelperEnv = "GITOPS_TEST_SERIALISE_HELPER"

// helperHold is how long each helper process keeps the lock.
const helperHold = 300 * time.Millisecond

// TestHelperProcess is not a test: the test binary re-executes itself
// with -test.run=^TestHelperProcess$ and serialiseHelperEnv set to play a
// second forged process. It says "ready", waits for a line on stdin, then
// takes the repository lock, holds it for helperHold and releases it,
// appending "<name> <event> <unix nanoseconds>" lines to the log for the
// events attempt, acquired and released ("released" is written while the
// lock is still held).
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv(serialiseHelperEnv)
	if spec == "" {
		return
	}
	os.Exit(serialiseHelper(spec))
}

func serialiseHelper(spec string) int {
	fields := strings.Split(spec, "\n")
	if len(fields) != 4 {
		fmt.Fprintln(os.Stderr, "bad helper spec")
		return 2
	}
	name, stateRoot, repo, logPath := fields[0], fields[1], fields[2], fields[3]
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logFile.Close()
	mark := func(event string) error {
		// One write per line on an O_APPEND file: lines never interleave.
		_, err := fmt.Fprintf(logFile, "%s %s %d\n", name, event, time.Now().UnixNano())
		return err
	}

	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go signal:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mark("attempt"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	release, err := AcquireRepoLock(ctx, stateRoot, repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mark("acquired"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	time.Sleep(helperHold)
	if err := mark("released"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := release(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lockEvent is one line of the helpers' log.
type lockEvent struct {
	name, event string
	at          int64
}

func TestRepoLockSerialisesProcesses(t *testing.T) {
	t.Parallel()
	state, repo := t.TempDir(), newRepo(t)
	logPath := filepath.Join(t.TempDir(), "events.log")

	type helper struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
	}
	var helpers []helper
	for _, name := range []string{"A", "B"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), serialiseHelperEnv+"="+strings.Join([]string{name, state, repo, logPath}, "\n"))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", line)
		helpers = append(helpers, helper{cmd, stdin})
	}
	// Both are running and waiting: release them together.
	for _, h := range helpers {
		_, err := io.WriteString(h.stdin, "go\n")
		require.NoError(t, err)
		require.NoError(t, h.stdin.Close())
	}
	for _, h := range helpers {
		require.NoError(t, h.cmd.Wait(), "helper exit status")
	}

	raw, err := os.ReadFile(logPath)
	require.NoError(t, err)
	var events []lockEvent
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, "log line %q", line)
		at, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		events = append(events, lockEvent{f[0], f[1], at})
	}
	require.Len(t, events, 6, "%s", raw)

	// The critical sections, in log order, must be acquired-released pairs
	// of one process followed by the other's.
	var sections []lockEvent
	for _, e := range events {
		if e.event != "attempt" {
			sections = append(sections, e)
		}
	}
	first, second := sections[0].name, sections[2].name
	require.NotEqual(t, first, second)
	assert.Equal(t, []string{first + " acquired", first + " released", second + " acquired", second + " released"},
		[]string{sections[0].name + " " + sections[0].event, sections[1].name + " " + sections[1].event,
			sections[2].name + " " + sections[2].event, sections[3].name + " " + sections[3].event},
		"critical sections interleaved:\n%s", raw)
	firstReleased, secondAcquired := sections[1].at, sections[2].at
	assert.GreaterOrEqual(t, secondAcquired, firstReleased, "the second process entered before the first left")
	assert.GreaterOrEqual(t, sections[1].at-sections[0].at, helperHold.Nanoseconds(), "the first held the lock for the whole hold")

	// And the test is not vacuous: the second process was already waiting
	// while the first held the lock.
	for _, e := range events {
		if e.name == second && e.event == "attempt" {
			assert.Less(t, e.at, firstReleased, "the second process did not contend for the lock:\n%s", raw)
		}
	}
}
