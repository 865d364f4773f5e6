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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
)

// TestDaemonAPIOnTheRealEngine serves the API on a unix socket and drives a
// whole attempt through it: submit, follow the NDJSON events to the
// outcome, snapshot, inspect, cancel an unknown attempt.
func TestDaemonAPIOnTheRealEngine(t *testing.T) {
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, runner.Config{
		StateRoot: t.TempDir(), LockRoot: t.TempDir(), WorkerBinary: workerbin.Path(t), Slots: 1,
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
	socketTransport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}
	client := &http.Client{Transport: clientHeaders{socketTransport}}

	// A DNS-rebinding page behind the console's forward: its own Host, a
	// simple text/plain POST with its own Origin. Both are refused on the
	// real socket, and the POST never reaches the dispatch decoder.
	raw := &http.Client{Transport: socketTransport}
	req, err := http.NewRequest(http.MethodGet, "http://evil.example:8080/v1/snapshot", nil)
	require.NoError(t, err)
	res, err := raw.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusMisdirectedRequest, res.StatusCode)
	assert.Contains(t, readAll(t, res), "api_host_refused")
	req, err = http.NewRequest(http.MethodPost, "http://localhost:8080/v1/attempts", strings.NewReader(`{"session":{"id":"x"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example:8080")
	res, err = raw.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Contains(t, readAll(t, res), "api_origin_refused")

	// A malformed dispatch is refused with its code.
	res, err = client.Post("http://forged/v1/attempts", "application/json", strings.NewReader(`{"session":{"id":"x"}}`))
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
		var line messages.StreamLine
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

	assertMetricsMatchTheAttempt(t, client, *outcome)

	// The console's stream carries the tree with each actor's counters and
	// the attempt's timeline.
	frame := readConsoleFrame(t, client)
	require.NotEmpty(t, frame.Actors)
	assert.Equal(t, "supervisor", frame.Actors[0].Kind)
	require.NotNil(t, frame.Actors[0].Stats, "the supervisor is instrumented")
	assert.Positive(t, frame.Actors[0].Stats.MessagesIn)
	require.NotEmpty(t, frame.Actors[0].Stats.Recent)
	for _, c := range frame.Actors[0].Stats.Recent {
		assert.Positive(t, c.Count, c.Kind)
		assert.NotContains(t, []string{"messages.Inspect", "messages.SnapshotRequest"}, c.Kind, "the console's polling is left out")
	}
	require.Len(t, frame.Attempts, 1)
	var phases []string
	for _, span := range frame.Attempts[0].Timeline {
		phases = append(phases, span.Phase)
		assert.Positive(t, span.Seconds, span.Phase)
	}
	assert.Equal(t, []string{messages.PhasePreparing, messages.PhaseBuilding, messages.PhaseProvisioning, messages.PhaseRunning,
		messages.PhaseCollecting, messages.PhaseImporting, messages.PhaseTearingDown}, phases)

	// The memory sampler's readings of the worker, against its limit,
	// for the console's chart.
	res, err = client.Get("http://forged/v1/attempts/" + d.AttemptID() + "/memory")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	var series messages.MemorySeries
	require.NoError(t, json.NewDecoder(res.Body).Decode(&series))
	res.Body.Close()
	assert.Equal(t, d.AttemptID(), series.AttemptID)
	assert.Equal(t, d.Sandbox.RequestedResources.WorkerMemoryLimitBytes, series.LimitBytes)
	require.NotEmpty(t, series.Samples, "the sampler read the worker while it ran")
	for i, s := range series.Samples {
		assert.Positive(t, s.UsageBytes, "sample %d", i)
		assert.LessOrEqual(t, int64(s.UsageBytes), series.LimitBytes, "sample %d", i)
		if i > 0 {
			assert.False(t, s.At.Before(series.Samples[i-1].At), "oldest first")
		}
	}

	// The finished attempt is listed, with its outcome.
	res, err = client.Get("http://forged/v1/attempts?state=finished&limit=5")
	require.NoError(t, err)
	var list messages.AttemptList
	require.NoError(t, json.NewDecoder(res.Body).Decode(&list))
	res.Body.Close()
	require.Len(t, list.Attempts, 1)
	assert.Equal(t, d.AttemptID(), list.Attempts[0].AttemptID)
	assert.Equal(t, "finished", list.Attempts[0].State)
	require.NotNil(t, list.Attempts[0].Outcome)
	assert.Equal(t, outcome.ResultCommitSHA, list.Attempts[0].Outcome.ResultCommitSHA)
	assert.Equal(t, len(types), list.Attempts[0].Events)
	res, err = client.Get("http://forged/v1/attempts?state=running")
	require.NoError(t, err)
	assert.JSONEq(t, `{"attempts":[]}`, readAll(t, res))
	for _, bad := range []string{"state=done", "limit=0", "limit=1001", "limit=x", "limit=1&limit=2", "order=asc"} {
		res, err = client.Get("http://forged/v1/attempts?" + bad)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, bad)
		assert.Contains(t, readAll(t, res), "query_invalid", bad)
	}

	req, err = http.NewRequest(http.MethodDelete, "http://forged/v1/attempts/00000000-0000-4000-8000-000000000000", nil)
	require.NoError(t, err)
	res, err = client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	res.Body.Close()
}

// clientHeaders adds what the CLI and package client send on a
// state-changing request (the API's guard refuses it without them).
type clientHeaders struct{ next http.RoundTripper }

func (c clientHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		req = req.Clone(req.Context())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(messages.APIClientHeader, messages.APIClientValue)
	}
	return c.next.RoundTrip(req)
}

// assertMetricsMatchTheAttempt scrapes /metrics on the socket, parses it
// with the Prometheus text parser and checks the counters against the one
// attempt (accepted once, refused once as a duplicate, succeeded).
func assertMetricsMatchTheAttempt(t *testing.T, client *http.Client, outcome messages.AttemptOutcome) {
	t.Helper()
	var families map[string]*dto.MetricFamily
	// The supervisor's own end of the attempt (its last phase) may trail
	// the stream's outcome by a message.
	require.Eventually(t, func() bool {
		res, err := client.Get("http://forged/metrics")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err = parser.TextToMetricFamilies(res.Body)
		require.NoError(t, err)
		return value(families, "forged_actors", "kind", "attempt") == 0
	}, 10*time.Second, 50*time.Millisecond)

	assert.Equal(t, 1.0, value(families, "forged_attempts_submitted_total", "result", "accepted"))
	assert.Equal(t, 1.0, value(families, "forged_attempts_submitted_total", "code", "attempt_duplicate"))
	assert.Equal(t, 1.0, value(families, "forged_attempts_finished_total", "status", "succeeded"))
	assert.Equal(t, 1.0, sum(families, "forged_attempts_finished_total"))
	for _, phase := range []string{messages.PhasePreparing, messages.PhaseBuilding, messages.PhaseProvisioning, messages.PhaseRunning,
		messages.PhaseCollecting, messages.PhaseImporting, messages.PhaseTearingDown} {
		assert.Equal(t, 1.0, histogramCount(families, "forged_attempt_phase_duration_seconds", "phase", phase), phase)
	}
	hits := value(families, "forged_build_cache_total", "result", "hit")
	misses := value(families, "forged_build_cache_total", "result", "miss")
	assert.Equal(t, 1.0, hits+misses, "one image lookup")
	assert.Equal(t, misses, histogramCount(families, "forged_build_permit_wait_seconds", "", ""), "a miss waits for the permit")
	assert.Equal(t, 1.0, histogramCount(families, "forged_build_duration_seconds", "", ""))
	peak := 0.0
	if outcome.PeakMemoryBytes > 0 {
		peak = 1
	}
	assert.Equal(t, peak, histogramCount(families, "forged_attempt_peak_memory_bytes", "", ""))
	assert.Equal(t, 1.0, value(families, "forged_slots_total", "", ""))
	assert.Equal(t, 0.0, value(families, "forged_slots_used", "", ""))
	assert.Equal(t, 0.0, value(families, "forged_queue_length", "", ""))
	assert.Equal(t, 1.0, value(families, "forged_reaper_rounds_total", "result", "ok"), "the start-up round")
	assert.Equal(t, 1.0, value(families, "forged_actors", "kind", "supervisor"))
	for _, kind := range []string{"supervisor", "attempt", "worker", "build"} {
		assert.Positive(t, value(families, "forged_actor_messages_received_total", "kind", kind), kind)
		assert.Positive(t, value(families, "forged_actor_messages_sent_total", "kind", kind), kind)
	}
	assert.Positive(t, value(families, "forged_actor_messages_received_total", "kind", "subscriber"), "the events and the outcome")
	assert.Equal(t, 0.0, value(families, "forged_actor_restarts_total", "kind", "attempt"))
}

// value is the value of the counter or gauge of family name whose label
// has value, summed over the matching series (all of them when label is
// empty).
func value(families map[string]*dto.MetricFamily, name, label, want string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		if label != "" && !hasLabel(m, label, want) {
			continue
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

func sum(families map[string]*dto.MetricFamily, name string) float64 {
	return value(families, name, "", "")
}

func histogramCount(families map[string]*dto.MetricFamily, name, label, want string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		if label != "" && !hasLabel(m, label, want) {
			continue
		}
		total += float64(m.GetHistogram().GetSampleCount())
	}
	return total
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// readConsoleFrame reads the first frame of /v1/inspect/stream.
func readConsoleFrame(t *testing.T, client *http.Client) runner.ConsoleFrame {
	t.Helper()
	res, err := client.Get("http://forged/v1/inspect/stream?interval=100ms")
	require.NoError(t, err)
	defer res.Body.Close()
	scanner := bufio.NewScanner(res.Body)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		if data, ok := strings.CutPrefix(scanner.Text(), "data: "); ok {
			var frame runner.ConsoleFrame
			require.NoError(t, json.Unmarshal([]byte(data), &frame))
			return frame
		}
	}
	t.Fatalf("no frame: %v", scanner.Err())
	return runner.ConsoleFrame{}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(raw)
}
