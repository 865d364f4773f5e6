package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/forgedev/forged/internal/kit/bearer"
)

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// TCPHandler is the TCP listener's handler: GET /metrics behind the bearer
// token, and nothing else.
func (m *Metrics) TCPHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return bearer.Require(token, "forged metrics", mux)
}
