package fleet

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// abortRecorder is the Local of TestLostAttemptsAreStopped: its runner id,
// and the aborts it is asked for. Nothing else of Local is used.
type abortRecorder struct {
	Local
	id      string
	mu      sync.Mutex
	aborted []string
	codes   []failure.Code
	seen    chan string
}

func (r *abortRecorder) RunnerID() string { return r.id }

func (r *abortRecorder) Abort(attemptID string, code failure.Code, _ string) (bool, error) {
	r.mu.Lock()
	r.aborted = append(r.aborted, attemptID)
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	r.seen <- attemptID
	return true, nil
}

// TestLostAttemptsAreStopped: on a real etcd, a member stops each of its
// attempts whose fate says the fleet lost it (lost:ITS-RUNNER-ID): those
// recorded before it watched (a member that restarted), those recorded
// while it watches, and those recorded after an etcd restart; never an
// attempt another member lost or one it claimed, and each once. Leave's
// cancel ends the watch.
func TestLostAttemptsAreStopped(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	local := &abortRecorder{id: "runner-a", seen: make(chan string, 16)}
	m := &Member{cfg: Config{Name: "watch"}, etcd: cli, local: local, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	settle := func(attempt, fate string) {
		t.Helper()
		_, err := m.settle(ctx, attempt, fate)
		require.NoError(t, err)
	}
	expect := func(attempt string) {
		t.Helper()
		select {
		case got := <-local.seen:
			assert.Equal(t, attempt, got)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was not stopped", attempt)
		}
	}

	settle("before", fateLost+"runner-a")
	settle("others", fateLost+"runner-b")
	settle("claimed", fateClaimed+"runner-a")
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go m.watchFates(watchCtx, done)
	expect("before")

	settle("while", fateLost+"runner-a")
	expect("while")

	etcd.Restart()
	settle("after-restart", fateLost+"runner-a")
	expect("after-restart")

	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end after its context")
	}
	local.mu.Lock()
	defer local.mu.Unlock()
	assert.Equal(t, []string{"before", "while", "after-restart"}, local.aborted, "each lost attempt of this member once, nothing else")
	for _, c := range local.codes {
		assert.Equal(t, failure.SandboxRunnerLost, c)
	}
}
