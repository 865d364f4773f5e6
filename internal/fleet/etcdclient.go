package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// validateEtcdTLS checks that the endpoints' schemes and the etcd TLS
// files agree: https endpoints need the CA that signed etcd's certificate,
// the CA is useless with plain http endpoints (the client would silently
// speak TLS to some and not others), and a client certificate comes with
// its key.
func (c Config) validateEtcdTLS() error {
	tlsWanted := c.EtcdCAFile != ""
	for _, ep := range c.Endpoints {
		if !strings.Contains(ep, "://") {
			// host:port, which the etcd client dials in plain text.
			if tlsWanted {
				return fmt.Errorf("config: fleetEtcd %q: with --fleet-etcd-ca every etcd endpoint must be https://", ep)
			}
			continue
		}
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("config: fleetEtcd %q: give a URL, http://host:port or https://host:port", ep)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("config: fleetEtcd %q: the scheme must be http or https", ep)
		}
		if u.Host == "" {
			return fmt.Errorf("config: fleetEtcd %q: give a URL, http://host:port or https://host:port", ep)
		}
		switch u.Scheme {
		case "https":
			if !tlsWanted {
				return fmt.Errorf("config: fleetEtcdCa: etcd endpoint %q speaks TLS; give the CA that signed its certificate (--fleet-etcd-ca)", ep)
			}
		case "http":
			if tlsWanted {
				return fmt.Errorf("config: fleetEtcd %q: with --fleet-etcd-ca every etcd endpoint must be https://", ep)
			}
		}
	}
	if (c.EtcdCertFile == "") != (c.EtcdKeyFile == "") {
		return errors.New("config: fleetEtcdCert, fleetEtcdKey: give both the etcd client certificate and its key, or neither")
	}
	if c.EtcdCertFile != "" && !tlsWanted {
		return errors.New("config: fleetEtcdCert: an etcd client certificate needs TLS to etcd (--fleet-etcd-ca and https:// endpoints)")
	}
	return nil
}

// etcdClientConfig is the configuration of every etcd client a member
// makes (the cluster provider's, the probe's, the member's own for fates
// and reachability): its endpoints, dial timeout and, with EtcdCAFile, TLS
// 1.2+ verified against that CA, presenting the client certificate when
// one is given.
func (c Config) etcdClientConfig(dialTimeout time.Duration) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: dialTimeout}
	if c.EtcdCAFile == "" {
		return cfg, nil
	}
	caPEM, err := os.ReadFile(c.EtcdCAFile)
	if err != nil {
		return cfg, fmt.Errorf("config: fleetEtcdCa: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return cfg, fmt.Errorf("config: fleetEtcdCa: %s holds no PEM certificate", c.EtcdCAFile)
	}
	// etcd 3.4 (Debian bookworm's) negotiates TLS 1.2 or 1.3; 1.2 is the
	// floor etcd itself documents.
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if c.EtcdCertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.EtcdCertFile, c.EtcdKeyFile)
		if err != nil {
			return cfg, fmt.Errorf("config: fleetEtcdCert/fleetEtcdKey: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tc
	return cfg, nil
}
