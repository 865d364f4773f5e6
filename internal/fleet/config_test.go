package fleet_test

import (
	"strings"
	"testing"

	"github.com/forgedev/forged/internal/fleet"
)

// TestConfigRefusalsNameTheFlag: without any fleet setting a daemon runs
// alone; with some but not all, or without the TLS files, it refuses to
// start with an error naming the flag to give.
func TestConfigRefusalsNameTheFlag(t *testing.T) {
	if (fleet.Config{}).Enabled() {
		t.Fatal("an empty fleet configuration joins a fleet")
	}
	full := fleet.Config{Endpoints: []string{"http://127.0.0.1:1"}, Name: "f", Advertise: "127.0.0.1:7000", CAFile: "ca", CertFile: "c", KeyFile: "k"}
	for _, tc := range []struct {
		change func(*fleet.Config)
		want   string
	}{
		{func(c *fleet.Config) { c.Endpoints = nil }, "--fleet-etcd"},
		{func(c *fleet.Config) { c.Name = "" }, "--fleet-name"},
		{func(c *fleet.Config) { c.Name = "a/b" }, "fleetName"},
		{func(c *fleet.Config) { c.Advertise = "" }, "--fleet-advertise"},
		{func(c *fleet.Config) { c.Advertise = "0.0.0.0:7000" }, "not 0.0.0.0"},
		{func(c *fleet.Config) { c.Advertise = "host" }, "host:port"},
		{func(c *fleet.Config) { c.KeyFile = "" }, "--fleet-key"},
		{func(c *fleet.Config) { c.Endpoints = []string{"https://127.0.0.1:1"} }, "--fleet-etcd-ca"},
		{func(c *fleet.Config) { c.EtcdCAFile = "etcd-ca" }, "must be https://"},
		{func(c *fleet.Config) { c.Endpoints, c.EtcdCAFile = []string{"127.0.0.1:1"}, "etcd-ca" }, "must be https://"},
		{func(c *fleet.Config) { c.Endpoints = []string{"unix:///run/etcd.sock"} }, "scheme must be http or https"},
		{func(c *fleet.Config) {
			c.Endpoints, c.EtcdCAFile, c.EtcdCertFile = []string{"https://127.0.0.1:1"}, "etcd-ca", "cert"
		}, "fleetEtcdKey"},
		{func(c *fleet.Config) { c.EtcdCertFile, c.EtcdKeyFile = "cert", "key" }, "--fleet-etcd-ca"},
		{func(c *fleet.Config) {}, "fleetCa"}, // the files do not exist
	} {
		cfg := full
		tc.change(&cfg)
		if !cfg.Enabled() {
			t.Fatalf("%+v is not enabled", cfg)
		}
		_, err := fleet.Join(cfg, newFakeRunner(1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Join(%+v) = %v; want an error naming %q", cfg, err, tc.want)
		}
	}
}
