// Package etcdtest starts a real etcd server for a test: Debian's etcd
// (scripts/ensure-etcd.sh installs it), alone on loopback, on free ports,
// with a data directory of its own, stopped when the test ends. Without an
// etcd binary the test is skipped, or failed under CI=true.
package etcdtest

import (
	"bytes"
	"context"
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

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	output *bytes.Buffer
}

// Start starts an etcd on loopback and registers its stop with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no etcd binary (run scripts/ensure-etcd.sh): %v", err)
		}
		t.Skipf("no etcd binary (run scripts/ensure-etcd.sh): %v", err)
	}
	s := &Server{t: t, bin: bin, dataDir: filepath.Join(t.TempDir(), "etcd"),
		client: freeAddr(t), peer: freeAddr(t)}
	t.Cleanup(s.Stop)
	s.start()
	return s
}

// Endpoint is the client URL (http://127.0.0.1:PORT).
func (s *Server) Endpoint() string { return "http://" + s.client }

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
	cmd := exec.Command(s.bin,
		"--name", "test",
		"--data-dir", s.dataDir,
		"--listen-client-urls", "http://"+s.client,
		"--advertise-client-urls", "http://"+s.client,
		"--listen-peer-urls", "http://"+s.peer,
		"--initial-advertise-peer-urls", "http://"+s.peer,
		"--initial-cluster", "test=http://"+s.peer,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	)
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
		if resp, err := http.DefaultClient.Do(req); err == nil {
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
