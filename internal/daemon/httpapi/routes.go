package httpapi

import (
	"net/http"

	"github.com/forgedev/forged/messages"
)

// Route is one route of the API: a method and an http.ServeMux path
// pattern ({name} a path parameter; a pattern ending in "/" serves the
// subtree below it).
type Route struct {
	Method  string
	Pattern string
	serve   func(a *api, w http.ResponseWriter, r *http.Request)
}

// routes is the API's route table, declared once: HandlerWith registers
// it, and the contract test checks docs/openapi.json against it (every
// route documented, nothing documented that is not a route, every answer
// valid). A new route is one line here with its handler, a method of api,
// and its operation in docs/openapi.json.
var routes = []Route{
	{http.MethodPost, "/v1/attempts", (*api).submit},
	{http.MethodGet, "/v1/attempts", (*api).list},
	{http.MethodGet, "/v1/attempts/{id}/events", (*api).events},
	{http.MethodGet, "/v1/attempts/{id}/memory", (*api).memory},
	{http.MethodDelete, "/v1/attempts/{id}", (*api).cancel},
	{http.MethodPost, "/v1/attempts/{id}/lease", (*api).renew},
	{http.MethodGet, "/v1/cleanup-reports", (*api).reports},
	{http.MethodDelete, "/v1/cleanup-reports/{id}", (*api).acknowledge},
	{http.MethodPost, "/v1/reap", (*api).reap},
	{http.MethodGet, "/v1/snapshot", (*api).snapshot},
	{http.MethodGet, "/v1/inspect", (*api).inspect},
	{http.MethodGet, "/v1/inspect/stream", (*api).inspectStream},
	{http.MethodGet, "/v1/fleet", (*api).fleet},
	{http.MethodGet, "/v1/fleet/members/{runnerId}/inspect", (*api).inspectMember},
	{http.MethodGet, "/metrics", (*api).serveMetrics},
	{http.MethodGet, "/console/", (*api).serveConsole},
	{http.MethodGet, "/v1/console/config", (*api).consoleConfig},
	{http.MethodDelete, "/v1/console/attempts/{id}", (*api).consoleCancelAttempt},
	{http.MethodGet, "/console", (*api).consoleRedirect},
	{http.MethodGet, "/v1/openapi.json", (*api).openAPI},
}

// Routes returns the route table.
func Routes() []Route { return append([]Route(nil), routes...) }

func (a *api) serveMetrics(w http.ResponseWriter, r *http.Request) { a.metrics.ServeHTTP(w, r) }

func (a *api) serveConsole(w http.ResponseWriter, r *http.Request) { a.console.ServeHTTP(w, r) }

func (a *api) consoleConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, messages.ConsoleConfig{Manage: a.opts.ManageToken != ""})
}

func (a *api) consoleCancelAttempt(w http.ResponseWriter, r *http.Request) {
	a.consoleCancel.ServeHTTP(w, r)
}

func (a *api) consoleRedirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
}

// openAPI serves the API's contract, docs/openapi.json as embedded.
func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDocument)
}
