// Package etcdtest starts a real etcd server for a test: Debian's etcd
// (scripts/ensure-etcd.sh installs it), alone on loopback, on free ports,
// with a data directory of its own, stopped when the test ends. Without an
// etcd binary the test is skipped, or failed under CI=true.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a fresh etcd may take to answer /health.
const startTimeout = 30 * time.Second

// Server is one running etcd.
type Server struct {
	t       testing.TB
	bin     string
	dataDir string
	client  string // host:port
	peer    string // host:port

	tls  *TLS         // nil: plain http
	http *http.Client // the health check's client

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	output *bytes.Buffer
}

// TLS makes the server speak TLS on its client URL: CertFile and KeyFile
// are its server certificate and key (naming 127.0.0.1), CAFile the CA that
// signed it. With ClientCertAuth it requires client certificates signed by
// that CA (etcd's --client-cert-auth); the health check then presents
// CertFile itself, which must allow client use too.
type TLS struct {
	CAFile, CertFile, KeyFile string
	ClientCertAuth            bool
}

// Option changes how Start runs etcd.
type Option func(*Server)

// WithTLS serves the client URL over TLS (see TLS).
func WithTLS(c TLS) Option { return func(s *Server) { s.tls = &c } }

// Start starts an etcd on loopback and registers its stop with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no etcd binary (run scripts/ensure-etcd.sh): %v", err)
		}
		t.Skipf("no etcd binary (run scripts/ensure-etcd.sh): %v", err)
	}
	s := &Server{t: t, bin: bin, dataDir: filepath.Join(t.TempDir(), "etcd"),
		client: freeAddr(t), peer: freeAddr(t), http: http.DefaultClient}
	for _, o := range opts {
		o(s)
	}
	if s.tls != nil {
		s.http = s.tlsHealthClient()
	}
	t.Cleanup(s.Stop)
	s.start()
	return s
}

// Endpoint is the client URL: http://127.0.0.1:PORT, or https:// with
// WithTLS.
func (s *Server) Endpoint() string {
	if s.tls != nil {
		return "https://" + s.client
	}
	return "http://" + s.client
}

// tlsHealthClient is an HTTP client that trusts the server's CA and, with
// ClientCertAuth, presents the server's own certificate.
func (s *Server) tlsHealthClient() *http.Client {
	s.t.Helper()
	caPEM, err := os.ReadFile(s.tls.CAFile)
	if err != nil {
		s.t.Fatalf("etcdtest: CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		s.t.Fatalf("etcdtest: %s holds no PEM certificate", s.tls.CAFile)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.tls.ClientCertAuth {
		pair, err := tls.LoadX509KeyPair(s.tls.CertFile, s.tls.KeyFile)
		if err != nil {
			s.t.Fatalf("etcdtest: key pair: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
}

// Stop stops etcd (SIGTERM, then SIGKILL after 10 s); stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Restart stops etcd and starts it again on the same ports and data
// directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// StartAgain starts a stopped etcd on the same ports and data directory.
func (s *Server) StartAgain() {
	s.t.Helper()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	out := &bytes.Buffer{}
	args := []string{
		"--name", "test",
		"--data-dir", s.dataDir,
		"--listen-client-urls", s.Endpoint(),
		"--advertise-client-urls", s.Endpoint(),
		"--listen-peer-urls", "http://" + s.peer,
		"--initial-advertise-peer-urls", "http://" + s.peer,
		"--initial-cluster", "test=http://" + s.peer,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	if s.tls != nil {
		args = append(args, "--cert-file", s.tls.CertFile, "--key-file", s.tls.KeyFile, "--trusted-ca-file", s.tls.CAFile)
		if s.tls.ClientCertAuth {
			args = append(args, "--client-cert-auth")
		}
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("etcdtest: start %s: %v", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.output = cmd, done, out
	s.mu.Unlock()
	if err := s.waitHealthy(done); err != nil {
		s.Stop()
		s.t.Fatalf("etcdtest: %v; its output:\n%s", err, out.String())
	}
}

// waitHealthy polls /health until etcd says it is healthy, it exits, or
// startTimeout passes.
func (s *Server) waitHealthy(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint()+"/health", nil)
		if resp, err := s.http.Do(req); err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(body.String(), `"true"`) {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("etcd exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy within %s", startTimeout)
		case <-tick.C:
		}
	}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
