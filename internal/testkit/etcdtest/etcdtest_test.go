package etcdtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStartServesAndStopCloses starts a real etcd, reads its health, and
// checks that Stop leaves nothing listening.
func TestStartServesAndStopCloses(t *testing.T) {
	s := Start(t)
	resp, err := http.Get(s.Endpoint() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `"true"`) {
		t.Fatalf("health = %s", body)
	}
	s.Restart()
	if _, err := http.Get(s.Endpoint() + "/health"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	s.Stop()
	if _, err := http.Get(s.Endpoint() + "/health"); err == nil {
		t.Fatal("etcd still answers after Stop")
	}
	s.Stop() // idempotent
}
