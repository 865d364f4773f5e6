package fleet_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// TestEtcdOverTLS: against a real etcd that serves TLS and requires client
// certificates, a member's etcd client configuration (the one the cluster
// provider, the join's probe and the member's own client share) verifies
// the server against --fleet-etcd-ca and presents --fleet-etcd-cert; the
// probe fails with an error naming the TLS flags without a client
// certificate, with a CA that did not sign etcd's certificate, and over
// plain http. The etcd CA is not the fleet's: the two are separate trust.
func TestEtcdOverTLS(t *testing.T) {
	etcdCA := newTestCA(t)
	serverCert, serverKey := etcdCA.member(t, "etcd")
	etcd := etcdtest.Start(t, etcdtest.WithTLS(etcdtest.TLS{CAFile: etcdCA.file, CertFile: serverCert, KeyFile: serverKey, ClientCertAuth: true}))
	require.True(t, strings.HasPrefix(etcd.Endpoint(), "https://"))
	clientCert, clientKey := etcdCA.member(t, "m0-etcd")
	good := fleet.Config{Endpoints: []string{etcd.Endpoint()}, Name: fleetName(),
		EtcdCAFile: etcdCA.file, EtcdCertFile: clientCert, EtcdKeyFile: clientKey}

	require.NoError(t, fleet.ProbeEtcd(good))
	cfg, err := good.EtcdClientConfig(5 * time.Second)
	require.NoError(t, err)
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/forged/test/"+good.Name, "x")
	require.NoError(t, err, "a write over TLS with the client certificate")

	noClientCert := good
	noClientCert.EtcdCertFile, noClientCert.EtcdKeyFile = "", ""
	otherCA := good
	otherCA.EtcdCAFile = newTestCA(t).file
	plain := good
	plain.Endpoints = []string{strings.Replace(etcd.Endpoint(), "https://", "http://", 1)}
	plain.EtcdCAFile, plain.EtcdCertFile, plain.EtcdKeyFile = "", "", ""
	// Each refusal takes the probe's whole timeout: run them side by side.
	t.Run("refused", func(t *testing.T) {
		for name, c := range map[string]fleet.Config{"no client certificate": noClientCert, "another CA": otherCA, "plain http": plain} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				err := fleet.ProbeEtcd(c)
				if assert.Error(t, err) {
					assert.Contains(t, err.Error(), "--fleet-etcd-ca")
				}
			})
		}
	})
}

// TestFleetOfDaemonsOverEtcdTLS: two `forged daemon` members join a fleet
// whose etcd serves TLS and requires client certificates (its own CA, not
// the fleet's), given --fleet-etcd-ca, --fleet-etcd-cert and
// --fleet-etcd-key: the cluster provider registers them and each sees the
// other. A third daemon given the etcd CA but no client certificate
// refuses to start, naming the TLS flags.
func TestFleetOfDaemonsOverEtcdTLS(t *testing.T) {
	etcdCA := newTestCA(t)
	serverCert, serverKey := etcdCA.member(t, "etcd")
	f := &testFleet{t: t, forged: enginetest.ForgedFleetBinary(t), ca: newTestCA(t), name: fleetName(),
		etcd: etcdtest.Start(t, etcdtest.WithTLS(etcdtest.TLS{CAFile: etcdCA.file, CertFile: serverCert, KeyFile: serverKey, ClientCertAuth: true}))}
	notRaceBuilt(t, f.forged)
	for i := range 2 {
		cert, key := etcdCA.member(t, "etcd-client-"+strconv.Itoa(i))
		f.members = append(f.members, f.newMember(1, "--fleet-etcd-ca", etcdCA.file, "--fleet-etcd-cert", cert, "--fleet-etcd-key", key))
	}
	f.waitDirectory(30*time.Second, f.members...)

	stateRoot := t.TempDir()
	cert, key := f.ca.member(t, "refused")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.forged, "daemon", "--socket", filepath.Join(stateRoot, "forged.sock"), "--state-root", stateRoot,
		"--lock-root", t.TempDir(), "--allow-rootful", "--slots", "1", "--host-reserved-cores", "0", "--host-reserve-bytes", strconv.Itoa(512<<20),
		"--fleet-etcd", f.etcd.Endpoint(), "--fleet-name", f.name, "--fleet-advertise", freeAddr(t),
		"--fleet-ca", f.ca.file, "--fleet-cert", cert, "--fleet-key", key, "--fleet-etcd-ca", etcdCA.file).CombinedOutput()
	require.Error(t, err, "a member without an etcd client certificate started: %s", out)
	require.NoError(t, ctx.Err(), "the daemon did not give up on etcd")
	assert.Contains(t, string(out), "--fleet-etcd-cert")
}
