// Package httpapi is the daemon's HTTP API, served on a unix socket that is
// created with mode 0600 (no chmod window) and serves only the peers whose
// uid (SO_PEERCRED) is allowed; see Listen. It lets clients submit a
// dispatch, follow its events as NDJSON, cancel it, and read the
// supervisor's snapshot or the live actor tree (the debug console). The
// bodies are package messages' types (messages/api.go); package client is
// the typed Go client.
//
//	POST   /v1/attempts             body: dispatch JSON → 202 {attemptId, queued} | 4xx {code, message}
//	GET    /v1/attempts?state=running|finished|all&limit=N → {attempts: [{attemptId, state, submittedAt, events, outcome}]}
//	GET    /v1/attempts/{id}/events[?after=SEQ] NDJSON: {"type":"event","seq":N,"event":{...}} … {"type":"finished","outcome":{...}}
//	GET    /v1/attempts/{id}/memory {attemptId, limitBytes, samples: [{at, usageBytes, cpuThrottledNanos}]}: the memory sampler's last readings
//	DELETE /v1/attempts/{id}        cancel → 202 | 404
//	POST   /v1/attempts/{id}/lease  body: {fencingToken, expiresAt} → 200 {accepted, expiresAt} | 404/409 {code, message}
//	GET    /v1/cleanup-reports      pending cleanup reports (teardown and reaper), durable until acknowledged
//	DELETE /v1/cleanup-reports/{id} acknowledge one → 204
//	POST   /v1/reap?dryRun=true     one reaper round now → the round's account
//	GET    /v1/snapshot             {slots, queued, starting, active, degraded, ...}
//	GET    /v1/inspect              [{pid, kind, phase, facts, children}, …]
//	GET    /v1/inspect/stream[?interval=1s] Server-Sent Events: one "frame" event (runner.ConsoleFrame) per interval
//	GET    /v1/fleet                {member, fleet, runnerId, members: [...]}: the fleet's directory through this member (member false when alone)
//	GET    /v1/fleet/members/{runnerId}/inspect  another member's live actor tree, through this member (404 fleet_member_unknown)
//	GET    /metrics                 Prometheus metrics (package metrics)
//	GET    /v1/console/config       {manage}: whether the console may cancel
//	DELETE /v1/console/attempts/{id} cancel from the console: needs --console-manage-token-file and its bearer token (else 403 console_read_only, 401)
//	GET    /console/                the live console: a read-only page (HTML and JS embedded in the binary)
//	GET    /v1/openapi.json         the OpenAPI 3.1 contract of these routes (docs/openapi.json, embedded)
//
// The routes are one table (routes.go), which the router registers and
// the contract test checks against docs/openapi.json.
//
// Every request passes the guard first (guard.go): a Host the daemon
// answers to, no foreign Origin, and for POST and DELETE the JSON content
// type and the X-Forged-Client header.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/kit/bearer"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// Runner is what the API needs from an embedded forged.
type Runner interface {
	Submit(d *messages.Dispatch) (messages.SubmitReply, error)
	Cancel(attemptID, reason string) (bool, error)
	Renew(attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error)
	Snapshot() (messages.Snapshot, error)
	Inspect() []messages.InspectReply
	Logs() *runner.Logs
	CleanupReports() ([]messages.CleanupReport, error)
	AcknowledgeReport(reportID string) error
	Reap(dryRun bool, snapshot *reaper.Snapshot) (reaper.Round, error)
	Metrics() *metrics.Metrics
	Console() runner.ConsoleFrame
}

// Handler returns the API's handler, with a read-only console.
func Handler(r Runner, logger *slog.Logger) http.Handler { return HandlerWith(r, logger, Options{}) }

// Options tune the API.
type Options struct {
	// ManageToken, when set, turns on the console's one manage action:
	// DELETE /v1/console/attempts/{id} cancels an attempt for a request
	// carrying "Authorization: Bearer <ManageToken>". Empty keeps the
	// console read-only (console_read_only).
	ManageToken string
	// AllowedHosts are Host names the API answers to besides localhost,
	// loopback addresses and messages.APISocketHost (--api-allowed-host);
	// every request is guarded (see guard).
	AllowedHosts []string
}

// HandlerWith returns the API's handler with opts: every route of the
// table (routes.go), behind the guard.
func HandlerWith(r Runner, logger *slog.Logger, opts Options) http.Handler {
	mux := http.NewServeMux()
	api := newAPI(r, logger, opts)
	for _, route := range routes {
		mux.HandleFunc(route.Method+" "+route.Pattern, func(w http.ResponseWriter, req *http.Request) { route.serve(api, w, req) })
	}
	return guard(mux, opts.AllowedHosts)
}

type api struct {
	runner Runner
	logger *slog.Logger
	opts   Options
	// Built once: the metrics scrape, the embedded console's files and
	// the console's cancel (behind the manage token when there is one).
	metrics, console, consoleCancel http.Handler
}

func newAPI(r Runner, logger *slog.Logger, opts Options) *api {
	a := &api{runner: r, logger: logger, opts: opts, metrics: r.Metrics().Handler(), console: consoleHandler()}
	if opts.ManageToken != "" {
		a.consoleCancel = bearer.Require(opts.ManageToken, "forged console", http.HandlerFunc(a.cancel))
	} else {
		a.consoleCancel = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeRefusal(w, failure.ConsoleReadOnly, "the console is read-only: start the daemon with --console-manage-token-file to allow cancelling")
		})
	}
	return a
}

// errorBody is the body of every refusal and failure.
type errorBody = messages.APIError

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeRefusal answers a refusal with its code's registered HTTP status.
func writeRefusal(w http.ResponseWriter, code failure.Code, message string) {
	writeJSON(w, failure.HTTPStatus(code), errorBody{Code: string(code), Message: message})
}

func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	d, err := messages.DecodeDispatch(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Code: string(failure.CodeOf(err)), Message: err.Error()})
		return
	}
	reply, err := a.runner.Submit(d)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: err.Error()})
		return
	}
	if !reply.Accepted {
		writeRefusal(w, failure.Code(reply.Code), reply.Message)
		return
	}
	a.logger.Info("attempt admitted", "attempt", reply.AttemptID, "queued", reply.Queued)
	writeJSON(w, http.StatusAccepted, messages.SubmitAccepted{AttemptID: reply.AttemptID, Queued: reply.Queued})
}

// Listing limits: the default and the largest limit of GET /v1/attempts.
const (
	DefaultListLimit = messages.DefaultAttemptListLimit
	MaxListLimit     = messages.MaxAttemptListLimit
)

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	for name := range query {
		if name != "state" && name != "limit" {
			writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("unknown query parameter %q (state, limit)", name))
			return
		}
		if len(query[name]) > 1 {
			writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("query parameter %q given twice", name))
			return
		}
	}
	state := query.Get("state")
	switch state {
	case "":
		state = messages.AttemptStateAll
	case messages.AttemptStateRunning, messages.AttemptStateFinished, messages.AttemptStateAll:
	default:
		writeRefusal(w, failure.QueryInvalid, "state must be running, finished or all")
		return
	}
	limit := DefaultListLimit
	if raw := query.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxListLimit {
			writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("limit must be an integer from 1 to %d", MaxListLimit))
			return
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, messages.AttemptList{Attempts: a.runner.Logs().List(state, limit)})
}

// eventsCursor reads the events stream's query: after, the sequence
// number of the last event the client saw (0, the default: from the first).
func eventsCursor(query url.Values) (int, error) {
	for name, values := range query {
		if name != "after" {
			return 0, fmt.Errorf("unknown query parameter %q (after)", name)
		}
		if len(values) > 1 {
			return 0, fmt.Errorf("query parameter %q given twice", name)
		}
	}
	raw := query.Get("after")
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return 0, errors.New("after must be the sequence number of the last event seen: an integer from 0")
	}
	return n, nil
}

func (a *api) events(w http.ResponseWriter, r *http.Request) {
	after, err := eventsCursor(r.URL.Query())
	if err != nil {
		writeRefusal(w, failure.QueryInvalid, err.Error())
		return
	}
	log, ok := a.runner.Logs().Get(r.PathValue("id"))
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody{Code: string(failure.AttemptNotFound), Message: "no such attempt"})
		return
	}
	if _, _, end, _ := log.Read(after); after > end {
		writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("after %d is past the attempt's last event (%d): ask again with a sequence number this stream gave", after, end))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	next := after
	for {
		events, outcome, end, changed := log.Read(next)
		first := end - len(events) + 1
		for i := range events {
			if enc.Encode(messages.StreamLine{Type: messages.StreamLineEvent, Seq: first + i, Event: &events[i]}) != nil {
				return
			}
		}
		next = end
		if outcome != nil {
			_ = enc.Encode(messages.StreamLine{Type: messages.StreamLineFinished, Outcome: outcome})
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	found, err := a.runner.Cancel(r.PathValue("id"), "cancelled through the daemon API")
	switch {
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: err.Error()})
	case !found:
		writeJSON(w, http.StatusNotFound, errorBody{Code: string(failure.AttemptNotFound), Message: "no such attempt"})
	default:
		writeJSON(w, http.StatusAccepted, messages.CancelAccepted{AttemptID: r.PathValue("id")})
	}
}

func (a *api) renew(w http.ResponseWriter, r *http.Request) {
	var req messages.RenewRequest
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err == nil {
		err = strictjson.Decode(raw, &req) // one document, no unknown fields, nothing after it
	}
	if err != nil || !messages.IsFullUUID(req.FencingToken) || req.ExpiresAt.IsZero() {
		writeRefusal(w, failure.LeaseRenewalInvalid, "body must be {fencingToken: full UUID, expiresAt: RFC 3339}")
		return
	}
	reply, err := a.runner.Renew(r.PathValue("id"), req.FencingToken, req.ExpiresAt)
	switch {
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: err.Error()})
	case !reply.Accepted:
		writeRefusal(w, failure.Code(reply.Code), reply.Message)
	default:
		writeJSON(w, http.StatusOK, reply)
	}
}

func (a *api) reports(w http.ResponseWriter, _ *http.Request) {
	reports, err := a.runner.CleanupReports()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Code: string(failure.CodeOf(err)), Message: err.Error()})
		return
	}
	if reports == nil {
		reports = []messages.CleanupReport{}
	}
	writeJSON(w, http.StatusOK, reports)
}

func (a *api) acknowledge(w http.ResponseWriter, r *http.Request) {
	if err := a.runner.AcknowledgeReport(r.PathValue("id")); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Code: string(failure.CodeOf(err)), Message: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) reap(w http.ResponseWriter, r *http.Request) {
	// The optional body is the server's snapshot of the live attempts.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeRefusal(w, failure.ReapRequestInvalid, "the reap request body is unreadable or larger than 1 MiB")
		return
	}
	snapshot, err := reaper.ParseSnapshot(raw)
	if err != nil {
		writeRefusal(w, failure.ReapRequestInvalid, err.Error())
		return
	}
	round, err := a.runner.Reap(r.URL.Query().Get("dryRun") == "true", snapshot)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.CodeOf(err)), Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, round)
}

func (a *api) snapshot(w http.ResponseWriter, _ *http.Request) {
	s, err := a.runner.Snapshot()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *api) inspect(w http.ResponseWriter, _ *http.Request) {
	tree := a.runner.Inspect()
	if tree == nil {
		tree = []messages.InspectReply{} // an array, as documented: never null
	}
	writeJSON(w, http.StatusOK, tree)
}

// Serve serves the API on l until ctx is cancelled, then shuts down
// gracefully within the grace period.
func Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		err := srv.Shutdown(shutdownCtx)
		if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
			return serveErr
		}
		return err
	}
}
