package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/messages"
)

// guardRunner counts what reaches the runner: a refused request must not.
type guardRunner struct {
	consoleRunner
	submits, cancels atomic.Int32
}

func (g *guardRunner) Submit(*messages.Dispatch) (messages.SubmitReply, error) {
	g.submits.Add(1)
	return messages.SubmitReply{AttemptID: "a1", Accepted: true}, nil
}

func (g *guardRunner) Cancel(string, string) (bool, error) {
	g.cancels.Add(1)
	return true, nil
}

const manageToken = "0123456789abcdef-manage"

func guarded(t *testing.T, opts httpapi.Options) (http.Handler, *guardRunner) {
	t.Helper()
	r := &guardRunner{consoleRunner: consoleRunner{metrics: metrics.New()}}
	return httpapi.HandlerWith(r, slog.New(slog.NewTextHandler(io.Discard, nil)), opts), r
}

// serve sends one request with the given Host and headers to h.
func serve(h http.Handler, method, host, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://x"+path, strings.NewReader(body))
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func refusalCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body messages.APIError
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	return body.Code
}

// A DNS-rebinding page reaches the forwarded socket under its own name:
// the daemon refuses to answer it, even a read.
func TestRebindingHostIsRefused(t *testing.T) {
	h, _ := guarded(t, httpapi.Options{})
	for _, host := range []string{"evil.example:8080", "evil.example", "localhost.evil.example:8080", "10.0.0.1:8080",
		"0.0.0.0:8080", "forged.evil.example", "[fe80::1]:8080", ""} {
		rec := serve(h, http.MethodGet, host, "/v1/snapshot", "", nil)
		assert.Equal(t, http.StatusMisdirectedRequest, rec.Code, host)
		assert.Equal(t, string(failure.APIHostRefused), refusalCode(t, rec), host)
		assert.Contains(t, rec.Body.String(), "--api-allowed-host", host)
	}
	for _, path := range []string{"/v1/inspect", "/metrics", "/console/", "/v1/attempts"} {
		rec := serve(h, http.MethodGet, "evil.example:8080", path, "", nil)
		assert.Equal(t, http.StatusMisdirectedRequest, rec.Code, path)
	}
}

func TestLocalHostsAreServed(t *testing.T) {
	h, _ := guarded(t, httpapi.Options{AllowedHosts: []string{"Forge.Internal"}})
	for _, host := range []string{"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:8080", "127.9.8.7:80",
		"[::1]:8080", "[::1]", "forged", "forge.internal:9000"} {
		rec := serve(h, http.MethodGet, host, "/v1/snapshot", "", nil)
		assert.Equal(t, http.StatusOK, rec.Code, "%s: %s", host, rec.Body.String())
	}
	// The extra name is the operator's choice: without it, it is foreign.
	h, _ = guarded(t, httpapi.Options{})
	assert.Equal(t, http.StatusMisdirectedRequest, serve(h, http.MethodGet, "forge.internal:9000", "/v1/snapshot", "", nil).Code)
}

// The simple cross-origin POST a page can send without a preflight: a
// text/plain body with its own Origin. It never reaches the decoder.
func TestForeignOriginPostIsRefused(t *testing.T) {
	h, r := guarded(t, httpapi.Options{})
	body := `{"session":{"id":"x"}}`
	rec := serve(h, http.MethodPost, "localhost:8080", "/v1/attempts", body,
		map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example:8080"})
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, string(failure.APIOriginRefused), refusalCode(t, rec))

	// Even with the client's headers (which a page cannot send without a
	// preflight), a foreign Origin, a null one or cross-site fetch
	// metadata is refused.
	client := map[string]string{"Content-Type": "application/json", messages.APIClientHeader: "1"}
	for _, extra := range []map[string]string{
		{"Origin": "http://evil.example:8080"}, {"Origin": "null"}, {"Origin": "http://localhost:9999"},
		{"Origin": "https://127.0.0.1:8080"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
	} {
		headers := map[string]string{}
		for k, v := range client {
			headers[k] = v
		}
		for k, v := range extra {
			headers[k] = v
		}
		rec := serve(h, http.MethodPost, "localhost:8080", "/v1/attempts", body, headers)
		assert.Equal(t, http.StatusForbidden, rec.Code, extra)
		assert.Equal(t, string(failure.APIOriginRefused), refusalCode(t, rec), extra)
	}
	assert.Zero(t, r.submits.Load(), "no refused request reached the runner")
}

// Without a foreign Origin, a state-changing request still needs the JSON
// content type and the client header.
func TestStateChangingRequestsNeedTheClientHeaders(t *testing.T) {
	h, r := guarded(t, httpapi.Options{})
	for _, headers := range []map[string]string{
		{"Content-Type": "text/plain"},
		{"Content-Type": "application/x-www-form-urlencoded", messages.APIClientHeader: "1"},
		{"Content-Type": "application/json"},
		{messages.APIClientHeader: "1"},
	} {
		for _, route := range [][2]string{{http.MethodPost, "/v1/attempts"}, {http.MethodDelete, "/v1/attempts/a1"},
			{http.MethodPost, "/v1/reap"}, {http.MethodDelete, "/v1/cleanup-reports/r1"}, {http.MethodPost, "/v1/attempts/a1/lease"}} {
			rec := serve(h, route[0], messages.APISocketHost, route[1], `{}`, headers)
			assert.Equal(t, http.StatusForbidden, rec.Code, "%v %v", route, headers)
			assert.Equal(t, string(failure.APIClientRequired), refusalCode(t, rec), "%v %v", route, headers)
		}
	}
	assert.Zero(t, r.submits.Load())
	assert.Zero(t, r.cancels.Load())

	rec := serve(h, http.MethodDelete, messages.APISocketHost, "/v1/attempts/a1", "",
		map[string]string{"Content-Type": "application/json; charset=utf-8", messages.APIClientHeader: "1"})
	assert.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	assert.EqualValues(t, 1, r.cancels.Load())
}

// The console's own cancel: same origin, with the headers the page sends.
func TestConsoleSameOriginCancelIsServed(t *testing.T) {
	h, r := guarded(t, httpapi.Options{ManageToken: manageToken})
	rec := serve(h, http.MethodDelete, "localhost:8080", "/v1/console/attempts/a1", "", map[string]string{
		"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin", "Authorization": "Bearer " + manageToken,
		"Content-Type": "application/json", messages.APIClientHeader: "1",
	})
	assert.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	assert.EqualValues(t, 1, r.cancels.Load())
}

func TestValidHostName(t *testing.T) {
	for _, good := range []string{"forge.internal", "localhost", "a-b.example", "192.168.1.5", "::1", "fe80::1"} {
		assert.True(t, httpapi.ValidHostName(good), good)
	}
	for _, bad := range []string{"", "evil.example:8080", "[::1]:80", "a..b", "-a.example", "a_b.example", "a b", "http://x", strings.Repeat("a", 64) + ".example"} {
		assert.False(t, httpapi.ValidHostName(bad), bad)
	}
}
