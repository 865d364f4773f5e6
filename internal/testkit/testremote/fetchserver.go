package testremote

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FetchServer is a read-only git smart-HTTP remote on loopback, in plain
// HTTP and without authentication: the public repository a dispatch's
// repo.remote names. Repositories under Root are served by git
// http-backend at /<name>; a push (git-receive-pack) is refused, and any
// path under /redirect/ answers 302 to the same path without the prefix,
// as a hostile or moved remote would.
type FetchServer struct {
	// Root holds the bare repositories.
	Root string
	// Server is the HTTP server, on 127.0.0.1.
	Server *httptest.Server

	mu    sync.Mutex
	paths []string
}

// NewFetchServer starts a FetchServer serving root.
func NewFetchServer(t testing.TB, root string) *FetchServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	f := &FetchServer{Root: root}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + root},
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		f.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			target := *r.URL
			target.Path = strings.TrimPrefix(r.URL.Path, "/redirect")
			http.Redirect(w, r, target.String(), http.StatusFound)
		case strings.Contains(r.URL.Path, "receive-pack") || r.URL.Query().Get("service") == "git-receive-pack":
			http.Error(w, "read-only", http.StatusForbidden)
		default:
			backend.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(f.Server.Close)
	return f
}

// URL is the remote URL of the repository at Root/name.
func (f *FetchServer) URL(name string) string { return f.Server.URL + "/" + name }

// Paths lists the paths of every request received, in order.
func (f *FetchServer) Paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}
