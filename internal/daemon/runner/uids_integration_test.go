package runner_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// Per-attempt identities (issue 28, finding 4): every sandbox ran as uid
// 10001, so the kernel's per-uid limits were shared. Attempt A's task
// holds every inotify instance its uid may have
// (fs.inotify.max_user_instances); attempt B's task, running beside it,
// must still get one (it got EMFILE when both ran as one uid). B also
// checks who it is and what it may write: its files in /workspace are
// its own uid's and imported, the image's files are readable and not
// writable.
func TestConcurrentAttemptsDoNotShareTheirUIDsLimits(t *testing.T) {
	e := newStressE2E(t)

	holder := e.dispatch([]string{"/bin/sh", "-c", "echo \"holder uid $(id -u)\"; exec /usr/local/bin/stressprog inotify-hold 110000"}, 0)
	holder.Lease.WorktreeKey = "forge/uids-holder" // never imported: it is cancelled
	holderLog := e.submit(holder)
	holding := waitForAgentLine(t, holderLog, "holding ")
	t.Logf("attempt A: %s", holding)
	n, err := strconv.Atoi(strings.Fields(strings.TrimPrefix(holding, "holding "))[0])
	require.NoError(t, err)
	require.Positive(t, n)
	holderUID := strings.TrimPrefix(waitForAgentLine(t, holderLog, "holder uid "), "holder uid ")

	script := strings.Join([]string{
		"set -u",
		"id -u > uid.txt",
		"/usr/local/bin/stressprog inotify-one > inotify.txt 2>&1 || true",
		"stat -c '%u:%g %a' /workspace /control/output $HOME /tmp > owners.txt",
		"head -c 4 /opt/forge/forged > /dev/null && echo readable > image.txt",
		"(echo x >> /opt/forge/forged) 2>/dev/null && echo image-written >> image.txt || echo image-refused >> image.txt",
		"touch written-by-task.txt",
	}, "\n")
	task := e.dispatch([]string{"/bin/sh", "-c", script}, 0)
	out := e.wait(e.submit(task))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)

	// A is still holding: B ran beside it.
	_, outcome, _, _ := holderLog.Read(0)
	assert.Nil(t, outcome, "attempt A ended before B was done")

	taskUID := e.git("show", out.ResultCommitSHA+":uid.txt")
	t.Logf("attempt A ran as %s, attempt B as %s", holderUID, taskUID)
	assert.NotEqual(t, holderUID, taskUID, "two live attempts share a uid")
	for _, uid := range []string{holderUID, taskUID} {
		n, err := strconv.Atoi(uid)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, n, supervisor.DefaultUIDBase, "a slot's uid")
		assert.NotEqual(t, messages.WorkerUID, n)
	}
	assert.Equal(t, "inotify ok", e.git("show", out.ResultCommitSHA+":inotify.txt"), "B got an inotify instance while A held its uid's every one")
	own := taskUID + ":" + taskUID
	assert.Equal(t, strings.Join([]string{own + " 755", own + " 755", own + " 700", own + " 1777"}, "\n"),
		e.git("show", out.ResultCommitSHA+":owners.txt"), "/workspace, /control/output, HOME and TMPDIR are the attempt's")
	assert.Equal(t, "readable\nimage-refused", e.git("show", out.ResultCommitSHA+":image.txt"))
	e.git("cat-file", "-e", out.ResultCommitSHA+":written-by-task.txt")

	found, err := e.runner.Cancel(holder.AttemptID(), "the test is done")
	require.NoError(t, err)
	require.True(t, found)
	held := e.wait(holderLog)
	assert.Equal(t, messages.StatusCancelled, held.Status, "%s: %s", held.Code, held.Message)
}

// waitForAgentLine waits for the task's output line starting with prefix.
func waitForAgentLine(t *testing.T, log *runner.Log, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	next := 0
	for {
		events, outcome, end, changed := log.Read(next)
		for _, ev := range events {
			for _, line := range strings.Split(ev.Content, "\n") {
				if ev.Role == messages.RoleAgent && strings.HasPrefix(line, prefix) {
					return strings.TrimSpace(line)
				}
			}
		}
		if outcome != nil {
			t.Fatalf("attempt finished (%s %s: %s) before printing %q; events: %v", outcome.Status, outcome.Code, outcome.Message, prefix, eventSummary(log))
		}
		next = end
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no line %q; events: %v", prefix, eventSummary(log))
		}
	}
}
