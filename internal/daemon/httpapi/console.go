package httpapi

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/forgedev/forged/failure"
)

// The console's page, script and style, embedded: no build step, nothing
// fetched from elsewhere.
//
//go:embed console/index.html console/console.js console/chart.js console/attempt.js console/fleet.js console/console.css
var consoleFiles embed.FS

// Stream intervals of GET /v1/inspect/stream.
const (
	DefaultStreamInterval = time.Second
	MinStreamInterval     = 100 * time.Millisecond
	MaxStreamInterval     = time.Minute
)

// consoleHandler serves the embedded console under /console/. The page
// runs only its own script (a strict Content-Security-Policy), talks only
// to this daemon, and cannot be framed.
func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/console/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// inspectStream sends a console frame (the actor tree with per-actor
// counters, the snapshot, the newest attempts and their timelines) as a
// Server-Sent Event every interval until the client goes away.
func (a *api) inspectStream(w http.ResponseWriter, r *http.Request) {
	interval := DefaultStreamInterval
	for name := range r.URL.Query() {
		if name != "interval" {
			writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("unknown query parameter %q (interval)", name))
			return
		}
	}
	if raw := r.URL.Query().Get("interval"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < MinStreamInterval || d > MaxStreamInterval {
			writeRefusal(w, failure.QueryInvalid, fmt.Sprintf("interval must be a duration from %s to %s", MinStreamInterval, MaxStreamInterval))
			return
		}
		interval = d
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: "streaming is not supported"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		data, err := json.Marshal(a.runner.Console())
		if err != nil {
			a.logger.Error("console frame", "err", err)
			return
		}
		// JSON holds no raw line break, so one data line carries the frame.
		if _, err := fmt.Fprintf(w, "event: frame\ndata: %s\n\n", data); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-ticker.C:
		case <-r.Context().Done():
			return
		}
	}
}

// memory serves the attempt's memory series (the sampler's last readings
// of its agent container and the container's limit) for the console's
// chart: empty until the first reading, 404 for an unknown attempt.
func (a *api) memory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := a.runner.Logs().Get(id); !ok {
		writeJSON(w, http.StatusNotFound, errorBody{Code: string(failure.AttemptNotFound), Message: "no such attempt"})
		return
	}
	series, _ := a.runner.Metrics().MemorySeries(id)
	writeJSON(w, http.StatusOK, series)
}
