package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// gatedStdout is a host that stops reading the worker's stdout at the
// first task_output line until open is closed: a loaded host.
type gatedStdout struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	open chan struct{}
	hit  chan struct{}
	once sync.Once
}

func (g *gatedStdout) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"eventType":"task_output"`)) {
		g.once.Do(func() { close(g.hit) })
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func taskOutputLines(events []messages.Event, stream string) []string {
	var lines []string
	for _, ev := range events {
		if ev.EventType != messages.TaskOutputEventType || ev.Data == nil {
			continue
		}
		var d struct{ Stream string }
		if json.Unmarshal([]byte(*ev.Data), &d) == nil && d.Stream == stream {
			lines = append(lines, ev.Content)
		}
	}
	return lines
}

// TestMainForwardsTheBacklogOfASlowHost: the task exits with thousands of
// lines still in its pipe while the host does not read; the drain grace
// counts only the time spent waiting on an empty pipe, so every line is
// forwarded once the host reads again (a fixed grace from the task's exit
// lost the backlog on a loaded machine).
func TestMainForwardsTheBacklogOfASlowHost(t *testing.T) {
	const lines = 10000
	f := newFixture(t, sh(`echo $$ > ../task.pid; i=0; while [ $i -lt 10000 ]; do echo x; i=$((i+1)); done`)...)
	f.cfg.DrainGrace = 20 * time.Millisecond
	out := &gatedStdout{open: make(chan struct{}), hit: make(chan struct{})}
	go func() {
		<-out.hit
		// Hold the host back until the task has exited and been reaped,
		// and many drain graces more.
		pidFile := filepath.Join(f.root, "task.pid")
		assert.Eventually(t, func() bool {
			raw, err := os.ReadFile(pidFile)
			if err != nil || len(bytes.TrimSpace(raw)) == 0 {
				return false
			}
			_, err = os.Stat("/proc/" + strings.TrimSpace(string(raw)))
			return os.IsNotExist(err)
		}, 30*time.Second, 5*time.Millisecond)
		time.Sleep(10 * f.cfg.DrainGrace)
		close(out.open)
	}()
	raw, err := json.Marshal(f.pkt)
	require.NoError(t, err)
	var stderr bytes.Buffer
	code := Main(context.Background(), bytes.NewReader(raw), out, &stderr, f.cfg)
	require.Equal(t, ExitOK, code, "stderr: %s", stderr.String())
	got := taskOutputLines(parseEvents(t, out.buf.String()), "stdout")
	assert.Len(t, got, lines, "every line of the backlog is forwarded")
	assert.NotContains(t, stderr.String(), "still wrote to its output")
}

// TestMainDrainEndsForAnEscapedWriter: a process that left the task's
// process group (its own session) and holds the output pipe open does
// not hold the worker: a silent one ends the drain after the grace, one
// that keeps writing after the drain limit, with a note.
func TestMainDrainEndsForAnEscapedWriter(t *testing.T) {
	const waitEscaped = `while [ ! -e ../escaped ]; do sleep 0.01; done; echo started`
	for name, tc := range map[string]struct {
		script string
		cut    bool
	}{
		// The task waits until the escaped process runs in its own
		// session (the marker), or the group kill could reach it first.
		"silent":  {`setsid /bin/sh -c 'touch ../escaped; exec sleep 60' & ` + waitEscaped, false},
		"writing": {`setsid /bin/sh -c 'touch ../escaped; while :; do echo tick; sleep 0.01; done' & ` + waitEscaped, true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, sh(tc.script)...)
			f.cfg.DrainGrace, f.cfg.DrainLimit = 100*time.Millisecond, time.Second
			if !tc.cut {
				f.cfg.DrainLimit = time.Hour // the grace alone must end it
			}
			res := f.run()
			require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
			stdout := taskOutputLines(res.events, "stdout")
			assert.Contains(t, stdout, "started")
			if tc.cut {
				assert.Contains(t, res.stderr, "still wrote to its output 1s after the task ended")
				assert.Contains(t, stdout, "tick", "the escaped writer's lines are forwarded until the limit")
			} else {
				assert.NotContains(t, res.stderr, "still wrote to its output")
			}
		})
	}
}
