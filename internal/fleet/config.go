package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

// Config is one member's fleet settings. A daemon joins a fleet only when
// Enabled says all three of Endpoints, Name and Advertise are set.
type Config struct {
	// Endpoints are the etcd client URLs: http://host:2379, or
	// https://host:2379 with EtcdCAFile.
	Endpoints []string
	// EtcdCAFile is the CA (PEM) that signed etcd's server certificate; it
	// makes the etcd client speak TLS, and then every endpoint must be
	// https://. EtcdCertFile and EtcdKeyFile are this member's etcd client
	// certificate and key, for an etcd that requires client certificates
	// (--client-cert-auth); both or neither.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// Name is the fleet's name: the cluster name and the etcd key prefix
	// below which its members register.
	Name string
	// Advertise is host:port the member's cluster port listens on and the
	// other members dial; host must be an address (not 0.0.0.0) that the
	// member's certificate names.
	Advertise string
	// CAFile, CertFile and KeyFile are the fleet CA's certificate and this
	// member's certificate and key (PEM). All three are required: the
	// cluster port speaks mutual TLS only.
	CAFile, CertFile, KeyFile string
	// Placement lets a dispatch whose execution.runnerId is AnyMember be
	// placed on the member with the most room for its requested resources
	// (see choose).
	Placement bool
	// Fence, when set, is the runner's fence (runner.Config.Fence) that
	// Join attaches to the member.
	Fence *Fence
	// RequestTimeout bounds one request to another member (default 5 s).
	RequestTimeout time.Duration
	// ReturnGrace is how long a submitter waits, once a member running
	// one of its attempts has left the member list, for that runner to be
	// listed again (a restarted daemon on the same state root, which
	// re-adopts its attempts) before it declares the attempt lost
	// (proxy.go). Default DefaultReturnGrace; negative: none.
	ReturnGrace time.Duration
	Logger      *slog.Logger
}

// DefaultRequestTimeout bounds one member-to-member request.
const DefaultRequestTimeout = 5 * time.Second

// DefaultReturnGrace is the default ReturnGrace: with the membership TTL
// and the follower's own request it keeps the time from a member's death
// to its attempts' sandbox_runner_lost under 10 s (docs/fleet.md).
const DefaultReturnGrace = 2 * time.Second

// Enabled reports whether any fleet setting is given.
func (c Config) Enabled() bool {
	return len(c.Endpoints) > 0 || c.Name != "" || c.Advertise != ""
}

// validate checks the settings, naming the flag to fix.
func (c Config) validate() error {
	switch {
	case len(c.Endpoints) == 0:
		return errors.New("config: fleetEtcd: a fleet member needs the etcd endpoints (--fleet-etcd)")
	case c.Name == "":
		return errors.New("config: fleetName: a fleet member needs the fleet's name (--fleet-name)")
	case c.Advertise == "":
		return errors.New("config: fleetAdvertise: a fleet member needs its cluster address, host:port (--fleet-advertise)")
	}
	if !validName(c.Name) {
		return fmt.Errorf("config: fleetName %q: use 1 to 63 letters, digits, '-' or '_'", c.Name)
	}
	host, port, err := splitAdvertise(c.Advertise)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("config: fleetAdvertise %q: name the address the other members dial, not %s", c.Advertise, host)
	}
	_ = port
	if err := c.validateEtcdTLS(); err != nil {
		return err
	}
	if c.CAFile == "" || c.CertFile == "" || c.KeyFile == "" {
		return errors.New("config: fleetCa, fleetCert, fleetKey: a fleet member needs the fleet CA and its own certificate and key (--fleet-ca, --fleet-cert, --fleet-key); docs/fleet.md shows how to make them")
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func splitAdvertise(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("config: fleetAdvertise %q: give host:port", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("config: fleetAdvertise %q: the port must be 1..65535", addr)
	}
	return host, port, nil
}

// tlsConfigs loads the fleet CA and the member's key pair and returns the
// cluster port's server side (client certificates required, verified
// against the fleet CA) and its dialling side (server verified against the
// same CA, own certificate presented).
func (c Config) tlsConfigs() (server, client *tls.Config, err error) {
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("config: fleetCa: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("config: fleetCa: %s holds no PEM certificate", c.CAFile)
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("config: fleetCert/fleetKey: %w", err)
	}
	server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
	}
	return server, client, nil
}
