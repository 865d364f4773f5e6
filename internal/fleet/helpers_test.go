package fleet_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
)

// fakeRunner is a member's runner as the fleet sees it (fleet.Local): it
// records what reaches it, so the tests can say which member ran what.
type fakeRunner struct {
	id    string
	slots int
	logs  *runner.Logs
	// finish ends every attempt at once, succeeded (the benchmark's
	// runners), so that the submitter's followers end.
	finish bool

	mu        sync.Mutex
	submitted []string
	cancelled []string
}

func newFakeRunner(slots int) *fakeRunner {
	return &fakeRunner{id: ids.NewUUID(), slots: slots, logs: runner.NewLogs(0)}
}

func (f *fakeRunner) Logs() *runner.Logs { return f.logs }

func (f *fakeRunner) RunnerID() string { return f.id }

func (f *fakeRunner) RunnerInstanceID() string { return "instance-" + f.id }

func (f *fakeRunner) Inspect() []messages.InspectReply {
	return []messages.InspectReply{{PID: "supervisor", Kind: "supervisor", Facts: map[string]string{"runner": f.id}}}
}

func (f *fakeRunner) Snapshot() (messages.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return messages.Snapshot{Slots: f.slots, Active: len(f.submitted), Attempts: append([]string(nil), f.submitted...)}, nil
}

func (f *fakeRunner) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submitted = append(f.submitted, d.AttemptID())
	if log, ok := f.logs.Open(d.AttemptID()); ok && f.finish {
		log.Finish(messages.AttemptOutcome{AttemptID: d.AttemptID(), Status: messages.StatusSucceeded})
	}
	return messages.SubmitReply{AttemptID: d.AttemptID(), Accepted: true}, nil
}

func (f *fakeRunner) Cancel(attemptID, _ string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, attemptID)
	for _, a := range f.submitted {
		if a == attemptID {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeRunner) Abort(attemptID string, _ failure.Code, reason string) (bool, error) {
	return f.Cancel(attemptID, reason)
}

// HoldAdmission and ReleaseAdmission: the fake admits regardless (the
// hold is the runner's, tested in internal/daemon/runner).
func (f *fakeRunner) Renew(attemptID, _ string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	return messages.RenewLeaseReply{AttemptID: attemptID, Accepted: true, ExpiresAt: expiresAt}, nil
}

func (f *fakeRunner) HoldAdmission(failure.Code, string) {}
func (f *fakeRunner) ReleaseAdmission()                  {}

func (f *fakeRunner) seen() (submitted, cancelled []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.submitted...), append([]string(nil), f.cancelled...)
}

// dispatchFor returns a valid dispatch naming runnerID, as JSON.
func dispatchFor(t *testing.T, runnerID string) (string, []byte) { return dispatchForB(t, runnerID) }

func dispatchForB(t testing.TB, runnerID string) (string, []byte) {
	t.Helper()
	d := actortest.NewDispatch(time.Now().Add(time.Hour).UTC().Truncate(time.Second))
	d.Execution.RunnerID = runnerID
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return d.AttemptID(), raw
}

// freeAddr returns a loopback host:port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testCA is a fleet CA made for one test.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "forged fleet test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &testCA{dir: dir, cert: cert, key: key, file: filepath.Join(dir, "ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// member issues a member certificate for 127.0.0.1 (server and client
// use) and returns its certificate and key files.
func (ca *testCA) member(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	return ca.memberAt(t, name, net.ParseIP("127.0.0.1"))
}

// memberAt is member for the given addresses.
func (ca *testCA) memberAt(t testing.TB, name string, ips ...net.IP) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(ca.dir, name+".pem")
	keyFile = filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// config is a member's fleet configuration with a certificate of ca.
func (ca *testCA) config(t testing.TB, endpoint, fleetName, name string) fleet.Config {
	cert, key := ca.member(t, name)
	return fleet.Config{Endpoints: []string{endpoint}, Name: fleetName, Advertise: freeAddr(t),
		CAFile: ca.file, CertFile: cert, KeyFile: key, RequestTimeout: 3 * time.Second}
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fleetName is a fleet name of its own for one test.
func fleetName() string { return "t" + ids.NewUUID()[:8] }

// exampleRepo builds the example's base image (busybox) on the engine and
// creates the example repository in a directory of the test's own, and
// returns its path.
func exampleRepo(ctx context.Context, t *testing.T) string {
	t.Helper()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = docker.Close() }()
	if _, err := example.BuildBaseImage(ctx, docker, "/bin/busybox"); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	if err := example.CreateRepo(ctx, repo, example.RepoOptions{}); err != nil {
		t.Fatal(err)
	}
	return repo
}
