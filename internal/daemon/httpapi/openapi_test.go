package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// The API's contract: docs/openapi.json (served at GET /v1/openapi.json)
// against the route table, the handlers' answers and package client,
// with kin-openapi's OpenAPI 3.1 validator (openapi3filter).

// The console's files are text: their bodies are checked as strings.
func init() {
	for _, media := range []string{"text/html", "text/css", "text/javascript"} {
		openapi3filter.RegisterBodyDecoder(media, openapi3filter.PlainBodyDecoder)
	}
}

// loadContract loads and validates the embedded document.
func loadContract(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(contractDocument(t))
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater(), "the contract is OpenAPI 3.1 (%s)", doc.OpenAPI)
	require.NoError(t, doc.Validate(loader.Context))
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return doc, router
}

// documentedPaths are the document's paths for a route's pattern: itself,
// and for a subtree pattern ("/console/") the files below it too
// ("/console/{file}"), as OpenAPI has no subtree paths.
func documentedPaths(pattern string) []string {
	if strings.HasSuffix(pattern, "/") {
		return []string{pattern, pattern + "{file}"}
	}
	return []string{pattern}
}

// TestContractDocumentsEveryRoute: every route of the table is in the
// document with its method, and the document has no route the table lacks.
func TestContractDocumentsEveryRoute(t *testing.T) {
	doc, _ := loadContract(t)
	table := map[string]bool{}
	for _, route := range httpapi.Routes() {
		for _, path := range documentedPaths(route.Pattern) {
			table[route.Method+" "+path] = true
		}
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for route := range table {
		assert.True(t, documented[route], "the route %s is missing from docs/openapi.json", route)
	}
	for route := range documented {
		assert.True(t, table[route], "docs/openapi.json documents %s, which is no route of the table (routes.go)", route)
	}
}

// TestContractIsServed: GET /v1/openapi.json is the embedded openapi.json,
// and docs/openapi.json is the same document.
func TestContractIsServed(t *testing.T) {
	h, _ := contractHandler(t, httpapi.Options{})
	rec := serve(h, http.MethodGet, messages.APISocketHost, "/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	served := contractDocument(t)
	assert.Equal(t, served, rec.Body.Bytes())
	manual, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "openapi.json"))
	require.NoError(t, err)
	assert.Equal(t, string(served), string(manual), "docs/openapi.json is a copy of the served contract: run `go generate ./internal/daemon/httpapi/`")
}

// contractDocument is the contract the daemon embeds and serves.
func contractDocument(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	return raw
}

// contractRunner is a daemon whose every route has something to answer.
type contractRunner struct {
	consoleRunner
	logs      *runner.Logs
	snapshots []reaper.Snapshot // the reap requests' snapshots
}

func (c *contractRunner) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	if _, ok := c.logs.Get(d.AttemptID()); ok {
		return messages.SubmitReply{AttemptID: d.AttemptID(), Code: "attempt_duplicate", Message: "the attempt is already known"}, nil
	}
	c.logs.Open(d.AttemptID())
	return messages.SubmitReply{AttemptID: d.AttemptID(), Accepted: true, Queued: true}, nil
}

func (c *contractRunner) Cancel(id, _ string) (bool, error) {
	_, ok := c.logs.Get(id)
	return ok, nil
}

func (c *contractRunner) Renew(id, _ string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	if _, ok := c.logs.Get(id); !ok {
		return messages.RenewLeaseReply{AttemptID: id, Code: "attempt_not_found", Message: "no such attempt"}, nil
	}
	return messages.RenewLeaseReply{AttemptID: id, Accepted: true, ExpiresAt: expiresAt}, nil
}

func (c *contractRunner) Snapshot() (messages.Snapshot, error) {
	return messages.Snapshot{Slots: 2, Active: 1, Attempts: []string{"a1"}, Headroom: &messages.Reservation{MemoryBytes: 1 << 30, CPUMillis: 1000}}, nil
}

func (c *contractRunner) Logs() *runner.Logs { return c.logs }

func (c *contractRunner) CleanupReports() ([]messages.CleanupReport, error) {
	return []messages.CleanupReport{{ReportID: "r1", Source: "teardown", Actions: []messages.CleanupAction{{
		DispatchAttemptID: "a1", ResourceType: "container", ResourceID: "forge-a1", Outcome: "removed", OccurredAt: time.Unix(1, 0).UTC(),
	}}}}, nil
}

func (c *contractRunner) Reap(dryRun bool, snapshot *reaper.Snapshot) (reaper.Round, error) {
	round := reaper.Round{Started: time.Unix(1, 0).UTC()}
	if snapshot != nil {
		c.snapshots = append(c.snapshots, *snapshot)
		round.Reaped = []string{"a3"}
		round.Audit = &imagegc.AuditReport{Removed: []imagegc.AuditRecord{{Key: strings.Repeat("a", 64), Modified: time.Unix(1, 0).UTC(), Dir: "attestations"}}, Kept: 2, Failed: []string{}}
	}
	object := reaper.Object{Kind: "container", ID: "c1", Name: "forge-a1", Labels: map[string]string{"dev.forge.managed": "true"}, Created: time.Unix(1, 0).UTC()}
	if dryRun {
		round.WouldReap = []string{"a1"}
		round.WouldRemove = []reaper.Object{object}
		round.Skipped = []reaper.Skip{{AttemptID: "a2", Object: object, Reason: reaper.SkipLive}}
	}
	return round, nil
}

// exchange is one request and answer the validator saw.
type exchange struct{ method, route string }

// validator wraps a handler: every request must be a route of the
// document and valid against it, and every answer (status, content type,
// headers, body; each line or event of a stream) valid against it.
type validator struct {
	t      *testing.T
	router routers.Router
	next   http.Handler

	mu   sync.Mutex
	seen []exchange
	// requestErrs collects the requests that do not match the document,
	// for a test that sends invalid ones on purpose; nil: each is an error.
	requestErrs *[]error
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := v.t
	// The document's server is the socket's name; the guard answers any
	// other Host (421 api_host_refused, documented on every operation),
	// so the operation is looked up by method and path alone.
	lookup := r.Clone(r.Context())
	lookup.Host, lookup.URL.Host, lookup.URL.Scheme = messages.APISocketHost, messages.APISocketHost, "http"
	route, params, err := v.router.FindRoute(lookup)
	if err != nil {
		t.Errorf("%s %s is not in docs/openapi.json: %v", r.Method, r.URL, err)
		v.next.ServeHTTP(w, r)
		return
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	options := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	input := &openapi3filter.RequestValidationInput{Request: lookup, PathParams: params, Route: route, Options: options}
	input.Request.Body = io.NopCloser(bytes.NewReader(body))
	if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
		err = fmt.Errorf("%s %s: the request does not match docs/openapi.json: %w", r.Method, r.URL, err)
		v.mu.Lock()
		if v.requestErrs != nil {
			*v.requestErrs = append(*v.requestErrs, err)
		} else {
			t.Error(err)
		}
		v.mu.Unlock()
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	v.next.ServeHTTP(rec, r)
	v.check(input, route, rec)
	v.mu.Lock()
	v.seen = append(v.seen, exchange{r.Method, route.Path})
	v.mu.Unlock()
}

// check validates one answer; a stream's body is validated item by item
// against its media type's schema, which is that of one item.
func (v *validator) check(input *openapi3filter.RequestValidationInput, route *routers.Route, rec *recorder) {
	t := v.t
	what := fmt.Sprintf("%s %s → %d", input.Request.Method, input.Request.URL, rec.status)
	media, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	stream := media == "application/x-ndjson" || media == "text/event-stream"
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: rec.status, Header: rec.Header(),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: stream}}
	out.SetBodyBytes(rec.body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: the answer does not match docs/openapi.json: %v\n%s", what, err, truncate(rec.body.String()))
		return
	}
	response := route.Operation.Responses.Status(rec.status)
	if !assert.NotNil(t, response, "%s: the status is not documented", what) {
		return
	}
	switch rec.status {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusNotModified:
		// openapi3filter skips these statuses whole: check their headers.
		for name, header := range response.Value.Headers {
			value := rec.Header().Get(name)
			if value == "" {
				assert.False(t, header.Value.Required, "%s: the header %s is missing", what, name)
				continue
			}
			assert.NoError(t, header.Value.Schema.Value.VisitJSON(value, openapi3.EnableJSONSchema2020()), "%s: the header %s", what, name)
		}
	}
	if !stream {
		return
	}
	mt := response.Value.Content.Get(media)
	if !assert.NotNil(t, mt, "%s: %s is not documented", what, media) {
		return
	}
	items := streamItems(media, rec.body.Bytes())
	if rec.status == http.StatusOK {
		assert.NotEmpty(t, items, "%s: a stream with no item validates nothing", what)
	}
	for _, item := range items {
		var value any
		if err := json.Unmarshal(item, &value); err != nil {
			t.Errorf("%s: a stream item is not JSON: %v: %s", what, err, item)
			continue
		}
		if err := mt.Schema.Value.VisitJSON(value, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: a stream item does not match docs/openapi.json: %v\n%s", what, err, truncate(string(item)))
		}
	}
}

// streamItems splits an NDJSON body into its lines, an event stream into
// its events' data.
func streamItems(media string, body []byte) [][]byte {
	var items [][]byte
	scanner := bufio.NewScanner(bytes.NewReader(body))
	scanner.Buffer(nil, 16<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		if media == "text/event-stream" {
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			line = data
		}
		if len(line) > 0 {
			items = append(items, slices.Clone(line))
		}
	}
	return items
}

func truncate(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// recorder passes an answer through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) { r.status = status; r.ResponseWriter.WriteHeader(status) }
func (r *recorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// covered fails for every route of the table no exchange reached.
func (v *validator) covered(t *testing.T, doc *openapi3.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, route := range httpapi.Routes() {
		for _, path := range documentedPaths(route.Pattern) {
			assert.True(t, slices.Contains(v.seen, exchange{route.Method, path}), "no answer of %s %s was validated: add a case", route.Method, path)
		}
	}
}

func contractHandler(t *testing.T, opts httpapi.Options) (http.Handler, *contractRunner) {
	t.Helper()
	r := &contractRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}
	return httpapi.HandlerWith(r, slog.New(slog.NewTextHandler(io.Discard, nil)), opts), r
}

// TestEveryAnswerMatchesTheContract drives requests through every route
// (answers and refusals, the guard's included) and validates each answer.
func TestEveryAnswerMatchesTheContract(t *testing.T) {
	doc, router := loadContract(t)
	readOnly, _ := contractHandler(t, httpapi.Options{})
	managed, r := contractHandler(t, httpapi.Options{ManageToken: manageToken})
	v := &validator{t: t, router: router, next: managed}
	vReadOnly := &validator{t: t, router: router, next: readOnly}
	// A member of a fleet, whose directory lists one member that answered
	// and one that did not.
	vFleet := &validator{t: t, router: router, next: httpapi.Handler(&fleetRunner{contractRunner: r, dir: sampleDirectory()}, slog.New(slog.NewTextHandler(io.Discard, nil)))}

	d := actortest.NewDispatch(time.Now().Add(time.Hour))
	dispatch, err := json.Marshal(d)
	require.NoError(t, err)
	log, _ := r.logs.Open("finished-1")
	log.Append(messages.RunnerEvent("sandbox_created", "one", map[string]int{"n": 1}))
	exit := 0
	log.Finish(messages.AttemptOutcome{
		AttemptID: "finished-1", Status: messages.StatusSucceeded, FinishedAt: time.Unix(2, 0).UTC(), WorkerExitCode: &exit,
		ResultCommitSHA: "0123abcd", ResultCommitCount: 1, ResultCommits: []messages.ResultCommit{{SHA: "0123abcd", Subject: "work"}},
		Telemetry: &messages.SandboxTelemetry{SchemaVersion: 1, Source: messages.TelemetryCgroupSampled, SampleCount: 3, PeakMemoryBytes: 1 << 20,
			FirstSampledAt: time.Unix(1, 0).UTC(), LastSampledAt: time.Unix(2, 0).UTC(),
			Containers: []messages.ContainerTelemetry{{ContainerID: "c1", Name: "forge-a1", Role: "worker", Source: messages.TelemetryCgroupSampled, PeakMemoryBytes: 1 << 20, Samples: 3}}},
		Cleanup: &messages.CleanupReport{ReportID: "r0", Source: "teardown", Actions: []messages.CleanupAction{}},
	})
	write := map[string]string{"Content-Type": "application/json", messages.APIClientHeader: messages.APIClientValue}
	bearer := map[string]string{"Content-Type": "application/json", messages.APIClientHeader: messages.APIClientValue, "Authorization": "Bearer " + manageToken}
	snapshot := fmt.Sprintf(`{"attemptSnapshot":[{"dispatchAttemptId":%q,"fencingToken":%q,"runnerInstanceId":%q,"expiresAt":%q}]}`,
		d.AttemptID(), d.Lease.FencingToken, d.Sandbox.RunnerInstanceID, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	renew := fmt.Sprintf(`{"fencingToken":%q,"expiresAt":%q}`, d.Lease.FencingToken, time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339))

	cases := []struct {
		h       http.Handler
		method  string
		path    string
		body    string
		headers map[string]string
		status  int
		// invalid: the document says the request is invalid, and the
		// daemon refuses it.
		invalid bool
	}{
		{v, http.MethodPost, "/v1/attempts", string(dispatch), write, http.StatusAccepted, false},
		{v, http.MethodPost, "/v1/attempts", string(dispatch), write, http.StatusConflict, false},
		{v, http.MethodPost, "/v1/attempts", `{"bad":1}`, write, http.StatusBadRequest, true},
		{v, http.MethodPost, "/v1/attempts", `{"bad":1,` + string(dispatch[1:]), write, http.StatusBadRequest, true},
		{v, http.MethodPost, "/v1/attempts", string(dispatch), nil, http.StatusForbidden, true},
		{v, http.MethodGet, "/v1/attempts", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/snapshot", "", map[string]string{"Host": "evil.example:8080"}, http.StatusMisdirectedRequest, false},
		{v, http.MethodGet, "/v1/snapshot", "", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, false},
		{v, http.MethodGet, "/v1/attempts?state=finished&limit=5", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/attempts?limit=0", "", nil, http.StatusBadRequest, true},
		{v, http.MethodGet, "/v1/attempts/finished-1/events", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/attempts/nope/events", "", nil, http.StatusNotFound, false},
		{v, http.MethodGet, "/v1/attempts/finished-1/events?after=1", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/attempts/finished-1/events?after=2", "", nil, http.StatusBadRequest, false},
		{v, http.MethodGet, "/v1/attempts/finished-1/events?after=-1", "", nil, http.StatusBadRequest, true},
		{v, http.MethodGet, "/v1/attempts/finished-1/events?from=1", "", nil, http.StatusBadRequest, false},
		{v, http.MethodGet, "/v1/attempts/finished-1/memory", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/attempts/nope/memory", "", nil, http.StatusNotFound, false},
		{v, http.MethodPost, "/v1/attempts/" + d.AttemptID() + "/lease", renew, write, http.StatusOK, false},
		{v, http.MethodPost, "/v1/attempts/" + d.AttemptID() + "/lease", `{}`, write, http.StatusBadRequest, true},
		{v, http.MethodDelete, "/v1/attempts/" + d.AttemptID(), "", write, http.StatusAccepted, false},
		{v, http.MethodDelete, "/v1/attempts/nope", "", write, http.StatusNotFound, false},
		{v, http.MethodGet, "/v1/cleanup-reports", "", nil, http.StatusOK, false},
		{v, http.MethodDelete, "/v1/cleanup-reports/r1", "", write, http.StatusNoContent, false},
		{v, http.MethodPost, "/v1/reap?dryRun=true", "", write, http.StatusOK, false},
		{v, http.MethodPost, "/v1/reap", snapshot, write, http.StatusOK, false},
		{v, http.MethodPost, "/v1/reap", `{"attemptSnapshot":[]}`, write, http.StatusOK, false},
		{v, http.MethodPost, "/v1/reap", `{"attemptSnapshot":[{"dispatchAttemptId":"nope"}]}`, write, http.StatusBadRequest, true},
		{v, http.MethodPost, "/v1/reap", `{"attempts":[]}`, write, http.StatusBadRequest, true},
		{v, http.MethodGet, "/v1/snapshot", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/inspect", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/fleet", "", nil, http.StatusOK, false},
		{vFleet, http.MethodGet, "/v1/fleet", "", nil, http.StatusOK, false},
		{vFleet, http.MethodGet, "/v1/fleet", "", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, false},
		{vFleet, http.MethodGet, "/v1/fleet/members/r2/inspect", "", nil, http.StatusOK, false},
		{vFleet, http.MethodGet, "/v1/fleet/members/r9/inspect", "", nil, http.StatusNotFound, false},
		{vFleet, http.MethodGet, "/v1/fleet/members/gone/inspect", "", nil, http.StatusServiceUnavailable, false},
		{v, http.MethodGet, "/v1/fleet/members/r2/inspect", "", nil, http.StatusNotFound, false},
		{v, http.MethodGet, "/v1/inspect/stream?interval=10s", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/inspect/stream?interval=1ns", "", nil, http.StatusBadRequest, false},
		{v, http.MethodGet, "/metrics", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/v1/console/config", "", nil, http.StatusOK, false},
		{v, http.MethodDelete, "/v1/console/attempts/finished-1", "", bearer, http.StatusAccepted, false},
		{v, http.MethodDelete, "/v1/console/attempts/finished-1", "", write, http.StatusUnauthorized, false},
		{vReadOnly, http.MethodDelete, "/v1/console/attempts/finished-1", "", write, http.StatusForbidden, false},
		{v, http.MethodGet, "/console", "", nil, http.StatusMovedPermanently, false},
		{v, http.MethodGet, "/console/", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/console/console.js", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/console/console.css", "", nil, http.StatusOK, false},
		{v, http.MethodGet, "/console/nope.js", "", nil, http.StatusNotFound, false},
		{v, http.MethodGet, "/v1/openapi.json", "", nil, http.StatusOK, false},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "http://"+messages.APISocketHost+c.path, strings.NewReader(c.body))
		for k, val := range c.headers {
			if k == "Host" {
				req.Host = val
			}
			req.Header.Set(k, val)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if strings.HasPrefix(c.path, "/v1/inspect/stream") {
			// The stream ends when its client goes: after the first frame.
			ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
		}
		var requestErrs []error
		for _, val := range []*validator{v, vReadOnly, vFleet} {
			val.requestErrs = &requestErrs
		}
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req.WithContext(ctx))
		cancel()
		assert.Equal(t, c.status, rec.Code, "%s %s: %s", c.method, c.path, truncate(rec.Body.String()))
		if c.invalid {
			assert.NotEmpty(t, requestErrs, "%s %s: the document allows a request the daemon refuses", c.method, c.path)
		} else {
			assert.Empty(t, requestErrs, "%s %s", c.method, c.path)
		}
	}
	v.mu.Lock()
	v.seen = append(append(v.seen, vReadOnly.seen...), vFleet.seen...)
	v.mu.Unlock()
	v.covered(t, doc)
	// The two valid snapshots reached the runner, the invalid ones did not.
	require.Len(t, r.snapshots, 2)
	require.Len(t, r.snapshots[0].Attempts, 1)
	assert.Equal(t, d.AttemptID(), r.snapshots[0].Attempts[0].AttemptID)
	assert.NotNil(t, r.snapshots[1].Attempts, "an empty snapshot is a snapshot")
	assert.Empty(t, r.snapshots[1].Attempts)
}

// TestClientMatchesTheContract runs every method of package client
// against the real API on a unix socket, behind the validator: each
// method's route is in the document with its method, each request and
// answer is valid against it, and each answer decodes into the client's
// types.
func TestClientMatchesTheContract(t *testing.T) {
	_, router := loadContract(t)
	h, r := contractHandler(t, httpapi.Options{})
	v := &validator{t: t, router: router, next: h}
	socket := filepath.Join(t.TempDir(), "forged.sock")
	l, err := httpapi.Listen(socket, httpapi.ListenOptions{})
	require.NoError(t, err)
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(serveCtx, l, v, time.Second) }()
	c := client.New(socket)
	defer func() {
		c.Close()
		stop()
		assert.NoError(t, <-served)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	called := map[string]bool{}
	call := func(method string, err error) {
		t.Helper()
		called[method] = true
		assert.NoError(t, err, "client.%s", method)
	}
	d := actortest.NewDispatch(time.Now().Add(time.Hour))
	accepted, err := c.Submit(ctx, d)
	call("Submit", err)
	assert.Equal(t, d.AttemptID(), accepted.AttemptID)
	list, err := c.Attempts(ctx, messages.AttemptStateAll, 10)
	call("Attempts", err)
	assert.Len(t, list.Attempts, 1)
	renewed, err := c.RenewLease(ctx, d.AttemptID(), d.Lease.FencingToken, d.Lease.ExpiresAt.Add(time.Hour))
	call("RenewLease", err)
	assert.True(t, renewed.Accepted)
	log, ok := r.logs.Get(d.AttemptID())
	require.True(t, ok)
	log.Append(messages.RunnerEvent("sandbox_created", "one", nil))
	log.Finish(messages.AttemptOutcome{AttemptID: d.AttemptID(), Status: messages.StatusCancelled, FinishedAt: time.Unix(2, 0).UTC()})
	events := 0
	outcome, err := c.Events(ctx, d.AttemptID(), func(messages.Event) error { events++; return nil })
	call("Events", err)
	assert.Equal(t, 1, events)
	assert.Equal(t, messages.StatusCancelled, outcome.Status)
	var seqs []int
	_, err = c.EventsAfter(ctx, d.AttemptID(), 0, func(seq int, _ messages.Event) error { seqs = append(seqs, seq); return nil })
	call("EventsAfter", err)
	outcome, err = c.Follow(ctx, d.AttemptID(), 0, func(seq int, _ messages.Event) error { seqs = append(seqs, seq); return nil })
	call("Follow", err)
	assert.Equal(t, []int{1, 1}, seqs)
	assert.Equal(t, messages.StatusCancelled, outcome.Status)
	call("Cancel", c.Cancel(ctx, d.AttemptID()))
	snapshot, err := c.Snapshot(ctx)
	call("Snapshot", err)
	assert.Equal(t, 2, snapshot.Slots)
	_, err = c.Inspect(ctx)
	call("Inspect", err)
	dir, err := c.Fleet(ctx)
	call("Fleet", err)
	assert.False(t, dir.Member, "the contract's daemon runs alone")
	_, err = c.InspectMember(ctx, "r2")
	called["InspectMember"] = true
	assert.Equal(t, failure.FleetMemberUnknown, failure.CodeOf(err), "a daemon running alone knows no member: %v", err)
	frameCtx, stopFrames := context.WithCancel(ctx)
	frames := 0
	call("Frames", c.Frames(frameCtx, 100*time.Millisecond, func(messages.ConsoleFrame, json.RawMessage) error {
		if frames++; frames == 2 {
			stopFrames()
		}
		return nil
	}))
	stopFrames()
	reports, err := c.CleanupReports(ctx)
	call("CleanupReports", err)
	assert.Len(t, reports, 1)
	call("AcknowledgeReport", c.AcknowledgeReport(ctx, "r1"))
	text, err := c.Metrics(ctx)
	call("Metrics", err)
	assert.Contains(t, text, "forged_")
	_, err = c.ConsoleConfig(ctx)
	call("ConsoleConfig", err)
	// A refusal decodes into *client.Error through the document's error body.
	_, err = c.Submit(ctx, d)
	var refused *client.Error
	assert.ErrorAs(t, err, &refused)

	// Every method of the client was run: a new one needs its call here.
	var methods []string
	typ := reflect.TypeOf(c)
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; name != "Close" && !called[name] {
			methods = append(methods, name)
		}
	}
	sort.Strings(methods)
	assert.Empty(t, methods, "client methods not checked against the contract")
	v.mu.Lock()
	assert.NotEmpty(t, v.seen)
	v.mu.Unlock()
}
