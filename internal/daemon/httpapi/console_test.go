package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// consoleRunner answers Console with numbered frames; the console
// endpoints use nothing else.
type consoleRunner struct {
	frames  atomic.Int64
	metrics *metrics.Metrics
}

func (c *consoleRunner) Console() runner.ConsoleFrame {
	n := c.frames.Add(1)
	return runner.ConsoleFrame{At: time.Unix(n, 0).UTC(), Actors: []runner.ActorView{{InspectReply: messages.InspectReply{PID: "supervisor", Kind: "supervisor"}}}}
}
func (c *consoleRunner) Metrics() *metrics.Metrics { return c.metrics }
func (c *consoleRunner) Submit(*messages.Dispatch) (messages.SubmitReply, error) {
	return messages.SubmitReply{}, nil
}
func (c *consoleRunner) Cancel(string, string) (bool, error) { return false, nil }
func (c *consoleRunner) Renew(string, string, time.Time) (messages.RenewLeaseReply, error) {
	return messages.RenewLeaseReply{}, nil
}
func (c *consoleRunner) Snapshot() (messages.Snapshot, error)              { return messages.Snapshot{}, nil }
func (c *consoleRunner) Inspect() []messages.InspectReply                  { return nil }
func (c *consoleRunner) Logs() *runner.Logs                                { return runner.NewLogs(0) }
func (c *consoleRunner) CleanupReports() ([]messages.CleanupReport, error) { return nil, nil }
func (c *consoleRunner) AcknowledgeReport(string) error                    { return nil }
func (c *consoleRunner) Reap(bool, *reaper.Snapshot) (reaper.Round, error) {
	return reaper.Round{}, nil
}

func newConsoleServer(t *testing.T) (*httptest.Server, *consoleRunner) {
	t.Helper()
	r := &consoleRunner{metrics: metrics.New()}
	srv := httptest.NewServer(httpapi.Handler(r, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)
	return srv, r
}

func TestInspectStreamSendsAFramePerInterval(t *testing.T) {
	srv, _ := newConsoleServer(t)
	res, err := http.Get(srv.URL + "/v1/inspect/stream?interval=100ms")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	scanner := bufio.NewScanner(res.Body)
	var frames []runner.ConsoleFrame
	event := ""
	for len(frames) < 3 && scanner.Scan() {
		line := scanner.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			assert.Equal(t, "frame", event)
			var f runner.ConsoleFrame
			require.NoError(t, json.Unmarshal([]byte(data), &f))
			frames = append(frames, f)
		}
	}
	require.Len(t, frames, 3)
	assert.True(t, frames[0].At.Before(frames[1].At) && frames[1].At.Before(frames[2].At), "each frame is taken anew")
	assert.Equal(t, "supervisor", frames[2].Actors[0].PID)
}

func TestInspectStreamRefusesABadInterval(t *testing.T) {
	srv, r := newConsoleServer(t)
	for _, q := range []string{"interval=1ms", "interval=2h", "interval=soon", "every=1s"} {
		res, err := http.Get(srv.URL + "/v1/inspect/stream?" + q)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, q)
		assert.Contains(t, string(body), "query_invalid", q)
	}
	assert.Zero(t, r.frames.Load(), "no frame is taken for a refused request")
}

func TestConsolePageIsEmbeddedAndLockedDown(t *testing.T) {
	srv, _ := newConsoleServer(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(srv.URL + "/console")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	assert.Equal(t, "/console/", res.Header.Get("Location"))

	res, err = http.Get(srv.URL + "/console/")
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, res.Header.Get("Content-Type"), "text/html")
	csp := res.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'self'")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	assert.Contains(t, string(page), `<script src="console.js" defer></script>`)
	assert.NotContains(t, string(page), "<script>", "no inline script: the CSP forbids it")

	res, err = http.Get(srv.URL + "/console/console.js")
	require.NoError(t, err)
	script, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, res.Header.Get("Content-Type"), "javascript")
	js := string(script)
	assert.Contains(t, js, `new EventSource("/v1/inspect/stream")`)
	assert.NotContains(t, js, "innerHTML", "daemon strings never become HTML")
	assert.NotContains(t, js, "insertAdjacentHTML")
	assert.Contains(t, js, "textContent = esc(")

	// The attempt view and the charts: scripts of the page's own, loaded
	// in order, putting daemon strings in as text only.
	for _, name := range []string{"chart.js", "attempt.js", "fleet.js"} {
		assert.Contains(t, string(page), `<script src="`+name+`" defer></script>`)
		res, err = http.Get(srv.URL + "/console/" + name)
		require.NoError(t, err)
		script, _ = io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, name)
		assert.Equal(t, res.Header.Get("Content-Security-Policy"), csp, name)
		assert.NotContains(t, string(script), "innerHTML", name)
		assert.NotContains(t, string(script), "insertAdjacentHTML", name)
		assert.NotContains(t, string(script), "http://cdn", name)
		assert.Contains(t, string(script), "textContent = esc(", name)
	}
}

func TestConsoleIsReadOnlyByDefault(t *testing.T) {
	srv, _ := newConsoleServer(t)
	res, err := http.Get(srv.URL + "/v1/console/config")
	require.NoError(t, err)
	assert.JSONEq(t, `{"manage":false}`, readAll(t, res))
	req := consoleDelete(srv.URL + "/v1/console/attempts/a1")
	req.Header.Set("Authorization", "Bearer anything-at-all-long")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Contains(t, readAll(t, res), "console_read_only")
}

// cancelRunner records the cancels it is asked for.
type cancelRunner struct {
	consoleRunner
	cancelled []string
}

func (c *cancelRunner) Cancel(id, _ string) (bool, error) {
	c.cancelled = append(c.cancelled, id)
	return true, nil
}

func TestConsoleCancelNeedsTheFlagAndTheToken(t *testing.T) {
	r := &cancelRunner{consoleRunner: consoleRunner{metrics: metrics.New()}}
	const token = "0123456789abcdef-manage"
	srv := httptest.NewServer(httpapi.HandlerWith(r, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Options{ManageToken: token}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/v1/console/config")
	require.NoError(t, err)
	assert.JSONEq(t, `{"manage":true}`, readAll(t, res))
	for _, auth := range []string{"", "Bearer wrong", token} {
		req := consoleDelete(srv.URL + "/v1/console/attempts/a1")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, auth)
	}
	assert.Empty(t, r.cancelled)
	req := consoleDelete(srv.URL + "/v1/console/attempts/a1")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusAccepted, res.StatusCode)
	assert.Equal(t, []string{"a1"}, r.cancelled)
}

// consoleDelete is the console page's cancel request: the JSON content
// type and the client header it sends, as the API's guard requires.
func consoleDelete(url string) *http.Request {
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(messages.APIClientHeader, messages.APIClientValue)
	return req
}

// memoryRunner is a consoleRunner with one attempt's log and metrics fed
// through an instrumented actor, as the daemon's tree feeds them.
type memoryRunner struct {
	consoleRunner
	logs *runner.Logs
}

func (m *memoryRunner) Logs() *runner.Logs { return m.logs }

func TestMemorySeriesRoute(t *testing.T) {
	r := &memoryRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}
	_, opened := r.logs.Open("att-1")
	require.True(t, opened)
	_, opened = r.logs.Open("att-quiet")
	require.True(t, opened)
	srv := httptest.NewServer(httpapi.Handler(r, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()

	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	feedMemory(t, r.metrics, "att-1", at, 3)

	get := func(id string) (int, string, messages.MemorySeries) {
		res, err := http.Get(srv.URL + "/v1/attempts/" + id + "/memory")
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var series messages.MemorySeries
		if res.StatusCode == http.StatusOK {
			assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
			require.NoError(t, json.Unmarshal(body, &series))
		}
		return res.StatusCode, string(body), series
	}
	status, _, series := get("att-1")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, int64(256<<20), series.LimitBytes)
	require.Len(t, series.Samples, 3)
	assert.Equal(t, uint64(3)<<20, series.Samples[2].UsageBytes)
	assert.Equal(t, at.Add(3*time.Second), series.Samples[2].At)

	status, body, series := get("att-quiet")
	require.Equal(t, http.StatusOK, status, "an attempt not sampled yet has an empty series")
	assert.Contains(t, body, `"samples":[]`)
	assert.Empty(t, series.Samples)

	status, body, _ = get("nope")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "attempt_not_found")
}

// feedMemory hands m n readings of the attempt (1 MiB more each second,
// under a 256 MiB limit) through an instrumented actor, as the attempt's
// sampler does in the daemon.
func feedMemory(t *testing.T, m *metrics.Metrics, attemptID string, at time.Time, n int) {
	t.Helper()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	done := make(chan struct{})
	pid := system.Root.Spawn(m.Instrument(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			close(done)
		}
	}), "attempt"))
	system.Root.Send(pid, messages.AttemptPhaseChanged{AttemptID: attemptID, Phase: messages.PhaseRunning})
	for i := 1; i <= n; i++ {
		system.Root.Send(pid, messages.MemorySampled{AttemptID: attemptID, LimitBytes: 256 << 20,
			Sample: messages.MemorySample{At: at.Add(time.Duration(i) * time.Second), UsageBytes: uint64(i) << 20}})
	}
	system.Root.Send(pid, "done")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the readings were not delivered")
	}
}
