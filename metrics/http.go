package metrics

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// MinTokenLength is the shortest bearer token accepted for the TCP
// listener.
const MinTokenLength = 16

// ReadTokenFile reads the TCP listener's bearer token: a regular file owned
// by this process's user, with no access for group or others, holding at
// least MinTokenLength characters (surrounding white space is ignored).
func ReadTokenFile(path string) (string, error) {
	if path == "" {
		return "", errors.New("metrics: a TCP listener needs a token file")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("metrics token %s: not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("metrics token %s: mode %04o gives access to group or others; use 0600", path, info.Mode().Perm())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("metrics token %s: owned by uid %d, not by forged's user", path, st.Uid)
	}
	raw, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < MinTokenLength || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("metrics token %s: one token of at least %d characters expected", path, MinTokenLength)
	}
	return token, nil
}

// RequireBearer serves next only to requests that carry
// "Authorization: Bearer <token>"; others get 401 and nothing else.
func RequireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="forged metrics"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TCPHandler is the TCP listener's handler: GET /metrics behind the bearer
// token, and nothing else.
func (m *Metrics) TCPHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return RequireBearer(token, mux)
}
