package egresstest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forgedev/forged/internal/kit/ids"
)

// The stand-ins of the netns guard's tests (docs/security.md, "Egress
// below squid"), all on this host: the cloud metadata address and a public
// address of the host, both on a bridge interface the test creates, so
// that what is sent to them stays here.
const (
	// Metadata is the cloud metadata service's address.
	Metadata = "169.254.169.254"
	// PublicHostAddr lies outside every range the guard treats as
	// private: only its host-address deny stops it.
	PublicHostAddr = "100.128.255.254"
)

// Trap is a TCP listener of the test process, counting the connections it
// accepts.
type Trap struct {
	// Addr is where it listens (host:port).
	Addr     string
	accepted atomic.Int32
}

// Accepted is the number of connections accepted since the last Reset.
func (tr *Trap) Accepted() int32 { return tr.accepted.Load() }

// Reset sets the count to zero.
func (tr *Trap) Reset() { tr.accepted.Store(0) }

// Listen starts a trap on addr (":0" for every address and a free port),
// closed at the test's cleanup.
func Listen(t testing.TB, addr string) *Trap {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("trap %s: %v", addr, err)
	}
	tr := &Trap{Addr: l.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			tr.accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return tr
}

// AddHostAddresses puts Metadata and PublicHostAddr on a bridge interface
// of their own and checks that the host delivers both locally, so that
// nothing sent to them can leave the machine; the interface goes at the
// test's cleanup. It needs root: skipped without, failed with CI=true.
func AddHostAddresses(t testing.TB) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but the netns guard tests need root (they add host addresses)")
		}
		t.Skip("the netns guard tests need root (they add host addresses)")
	}
	name := "fgtrap" + ids.NewUUID()[:6]
	ip := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ip("link", "add", name, "type", "bridge")
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			t.Errorf("remove %s: %v %s", name, err, out)
		}
	})
	addrs := []string{Metadata, PublicHostAddr}
	for _, a := range addrs {
		ip("addr", "add", a+"/32", "dev", name)
	}
	ip("link", "set", name, "up")
	for _, a := range addrs {
		if out := ip("route", "get", a); !strings.HasPrefix(out, "local ") {
			t.Fatalf("%s must be delivered locally: %s", a, out)
		}
	}
	return addrs
}
