// Package testremote stands up publication remotes for tests on loopback:
// a test certificate authority, HTTPS servers whose certificates it signs,
// and a git smart-HTTP remote (git http-backend behind a Go TLS server)
// that checks HTTP basic auth against one issued credential.
package testremote

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate in PEM, for git's GIT_SSL_CAINFO and
	// forged's --publish-ca-file.
	CertFile string
}

// NewCA creates a CA valid for an hour and writes its certificate under
// t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "forged test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, CertFile: path}
}

// ServerConfig returns a TLS configuration with a leaf certificate for
// 127.0.0.1 and localhost signed by the CA.
func (ca *CA) ServerConfig(t testing.TB) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// Serve starts an HTTPS server on 127.0.0.1 with a certificate signed by
// the CA; it is closed when the test ends.
func (ca *CA) Serve(t testing.TB, handler http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = ca.ServerConfig(t)
	// Handshakes refused by clients that do not trust the CA are expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// GitServer is a git smart-HTTP remote over TLS: repositories under Root
// at /<owner>/<repo>.git, served by git http-backend to requests carrying
// exactly the basic-auth pair it was made with, refused with 401
// otherwise.
type GitServer struct {
	// Root holds the bare repositories.
	Root string
	// Server is the TLS server; its address is 127.0.0.1:port.
	Server *httptest.Server

	username, secret string
	requests         atomic.Int64
	mu               sync.Mutex
	paths            []string
	authHeaders      []string
}

// NewGitServer starts a git remote accepting username and secret.
func NewGitServer(t testing.TB, ca *CA, username, secret string) *GitServer {
	t.Helper()
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	g := &GitServer{Root: t.TempDir(), username: username, secret: secret}
	cgiHandler := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + g.Root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + username},
	}
	g.Server = ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.requests.Add(1)
		g.mu.Lock()
		g.paths = append(g.paths, r.URL.Path)
		g.mu.Unlock()
		user, pass, ok := r.BasicAuth()
		if !ok || user != g.username || pass != g.secret {
			g.mu.Lock()
			g.authHeaders = append(g.authHeaders, r.Header.Get("Authorization"))
			g.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="forged test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	return g
}

// Host is the server's host:port.
func (g *GitServer) Host() string { return g.Server.Listener.Addr().String() }

// URL is the remote URL of owner/repo.
func (g *GitServer) URL(owner, repo string) string {
	return "https://" + g.Host() + "/" + owner + "/" + repo + ".git"
}

// CreateRepo initialises the bare repository owner/repo and returns its
// path.
func (g *GitServer) CreateRepo(t testing.TB, owner, repo string) string {
	t.Helper()
	path := filepath.Join(g.Root, owner, repo+".git")
	if out, err := exec.Command("git", "init", "-q", "--bare", path).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return path
}

// Requests is how many requests the server has received.
func (g *GitServer) Requests() int64 { return g.requests.Load() }

// Paths lists the paths of every request received, in order.
func (g *GitServer) Paths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.paths...)
}

// Refused lists the Authorization headers of the requests refused with 401.
func (g *GitServer) Refused() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.authHeaders...)
}

// BasicAuth is the Authorization header value of username and secret.
func BasicAuth(username, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(username+":"+secret))
}
