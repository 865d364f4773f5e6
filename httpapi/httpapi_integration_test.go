package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/example"
	"github.com/forgedev/forged/httpapi"
	"github.com/forgedev/forged/internal/enginetest"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/runner"
)

// TestDaemonAPIOnTheRealEngine serves the API on a unix socket and drives a
// whole attempt through it: submit, follow the NDJSON events to the
// outcome, snapshot, inspect, cancel an unknown attempt.
func TestDaemonAPIOnTheRealEngine(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, runner.Config{
		StateRoot: t.TempDir(), LockRoot: t.TempDir(), WorkerBinary: enginetest.ForgedBinary(t), Slots: 1,
		AllowRootful: true, Capacity: example.SmallHostCapacity(),
	})
	require.NoError(t, err)
	defer r.Close()
	_, err = example.BuildBaseImage(ctx, r.Docker(), "/bin/busybox")
	require.NoError(t, err)
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	socket := filepath.Join(t.TempDir(), "forged.sock")
	l, err := httpapi.Listen(socket, httpapi.ListenOptions{})
	require.NoError(t, err)
	info, err := os.Stat(socket)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- httpapi.Serve(serveCtx, l, httpapi.Handler(r, slog.New(slog.NewTextHandler(io.Discard, nil))), time.Second)
	}()
	defer func() {
		stopServing()
		assert.NoError(t, <-served)
	}()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}

	// A malformed dispatch is refused with its code.
	res, err := client.Post("http://forged/v1/attempts", "application/json", strings.NewReader(`{"session":{"id":"x"}}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Contains(t, readAll(t, res), "dispatch_invalid")

	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: r.RunnerID(), RepoPath: repo})
	require.NoError(t, err)
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
	body, err := json.Marshal(d)
	require.NoError(t, err)
	res, err = client.Post("http://forged/v1/attempts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, res.StatusCode, readAll(t, res))
	res.Body.Close()

	// The same attempt twice is a conflict.
	res, err = client.Post("http://forged/v1/attempts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, res.StatusCode)
	assert.Contains(t, readAll(t, res), "attempt_duplicate")

	res, err = client.Get("http://forged/v1/inspect")
	require.NoError(t, err)
	var tree []messages.InspectReply
	require.NoError(t, json.NewDecoder(res.Body).Decode(&tree))
	res.Body.Close()
	require.NotEmpty(t, tree)
	assert.Equal(t, "supervisor", tree[0].Kind)

	res, err = client.Get("http://forged/v1/attempts/" + d.AttemptID() + "/events")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	var types []string
	var outcome *messages.AttemptOutcome
	scanner := bufio.NewScanner(res.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line httpapi.StreamLine
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line))
		if line.Event != nil {
			types = append(types, line.Event.EventType)
		}
		if line.Outcome != nil {
			outcome = line.Outcome
		}
	}
	res.Body.Close()
	require.NotNil(t, outcome, "the stream ends with the outcome")
	assert.Equal(t, messages.StatusSucceeded, outcome.Status, outcome.Message)
	assert.Contains(t, types, "sandbox_output_imported")

	// The supervisor learns of the end separately from the stream.
	var snap messages.Snapshot
	require.Eventually(t, func() bool {
		res, err := client.Get("http://forged/v1/snapshot")
		require.NoError(t, err)
		defer res.Body.Close()
		require.NoError(t, json.NewDecoder(res.Body).Decode(&snap))
		return snap.Active+snap.Starting+snap.Queued == 0
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, snap.Slots)
	require.NotNil(t, snap.Preflight, "the snapshot carries the preflight report")
	assert.True(t, snap.Preflight.Available)

	// A finished attempt's lease cannot be renewed.
	res, err = client.Post("http://forged/v1/attempts/"+d.AttemptID()+"/lease", "application/json",
		strings.NewReader(`{"fencingToken":"`+d.Lease.FencingToken+`","expiresAt":"2031-01-01T00:00:00Z"}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	assert.Contains(t, readAll(t, res), "attempt_not_found")

	req, err := http.NewRequest(http.MethodDelete, "http://forged/v1/attempts/00000000-0000-4000-8000-000000000000", nil)
	require.NoError(t, err)
	res, err = client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	res.Body.Close()
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(raw)
}
