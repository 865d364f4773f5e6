package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func taskResources(t *testing.T, events []messages.Event) messages.TaskResources {
	t.Helper()
	ev := findEvent(t, events, messages.TaskResourcesEvent)
	require.NotNil(t, ev.Data)
	var r messages.TaskResources
	require.NoError(t, json.Unmarshal([]byte(*ev.Data), &r))
	return r
}

func TestResourcesReportFileDescriptorExhaustion(t *testing.T) {
	// The task lowers its own limit, opens descriptors up to it and holds
	// them (a builtin loop: no exec needs a descriptor meanwhile): the
	// worker sees it from /proc, not from what the task says.
	f := newFixture(t, "/bin/sh", "-c", `ulimit -n 10; exec 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null 9</dev/null; n=0; while [ $n -lt 300000 ]; do n=$((n+1)); done; exit 1`)
	res := f.run()
	assert.Equal(t, ExitTaskFailed, res.code, res.stderr)
	r := taskResources(t, res.events)
	assert.True(t, r.TaskFailed)
	assert.Equal(t, 1, r.TaskExitCode)
	assert.True(t, r.FDExhausted, "%+v", r)
	assert.Equal(t, 10, r.FDLimit)
	assert.GreaterOrEqual(t, r.MaxOpenFiles, 10)
}

func TestResourcesClaimsInTaskOutputAreNotReports(t *testing.T) {
	// A task printing the words of a resource failure claims nothing.
	f := newFixture(t, "/bin/sh", "-c", `echo 'Too many open files'; echo '{"type":"runner_event","event":{"role":"runner","kind":"error","eventType":"task_resources","content":"x","data":"{\"fdExhausted\":true}"}}'; exit 1`)
	res := f.run()
	r := taskResources(t, res.events)
	assert.False(t, r.FDExhausted)
	n := 0
	for _, ev := range res.events {
		if ev.EventType == messages.TaskResourcesEvent {
			n++
		}
	}
	assert.Equal(t, 1, n, "the task's line arrives wrapped as task_output, never as the worker's event")
	for _, s := range r.Storage {
		assert.False(t, s.Full, "%+v", s)
	}
	assert.Len(t, r.Storage, 2, "TMPDIR and the workspace are watched")
}

func TestResourceWatchSeesAFullFileSystem(t *testing.T) {
	// A real tmpfs cannot be mounted here without privilege; the check is
	// the threshold on statfs's numbers, exercised on the real root.
	w := startResourceWatch(nil, t.TempDir())
	r := w.finish(true, 1)
	require.Len(t, r.Storage, 1)
	s := r.Storage[0]
	assert.Equal(t, s.MinFreeBytes < fullBelowBytes, s.Full)
	assert.NotZero(t, s.TotalBytes)
}

func TestWorkerWaitsForTheHostRelease(t *testing.T) {
	f := newFixture(t, "/bin/sh", "-c", "touch "+filepath.Join(t.TempDir(), "x"))
	f.pkt.ReleaseWaitMillis = 400
	res := f.run()
	assert.Equal(t, ExitOK, res.code, res.stderr)
	assert.GreaterOrEqual(t, res.elapsed, 400*time.Millisecond, "no release: the worker waits the whole bound")
	assert.Contains(t, res.stderr, "did not release")

	// A release delivered before the wait (the task can signal the worker
	// while it runs) is discarded.
	g := newFixture(t, "/bin/sh", "-c", "true")
	g.release <- syscall.SIGUSR1
	g.pkt.ReleaseWaitMillis = 300
	res = g.run()
	assert.GreaterOrEqual(t, res.elapsed, 300*time.Millisecond, "a release sent while the task ran does not count")
	assert.Contains(t, res.stderr, "did not release")

	// The host's release ends the wait at once.
	h := newFixture(t, "/bin/sh", "-c", "true")
	h.pkt.ReleaseWaitMillis = 20_000
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := os.Stat(filepath.Join(h.cfg.OutputDir, messages.ManifestFile)); err == nil {
				h.release <- syscall.SIGUSR1
				return
			}
		}
	}()
	res = h.run()
	close(stop)
	<-done
	assert.Equal(t, ExitOK, res.code, res.stderr)
	assert.Less(t, res.elapsed, 10*time.Second)
	assert.NotContains(t, res.stderr, "did not release")
}
