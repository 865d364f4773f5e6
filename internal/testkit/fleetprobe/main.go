// Command fleetprobe is a test helper: a process that is no fleet member
// sends every request a member's fleet actor answers (state, directory,
// submit, cancel) to a member's cluster port and prints how many were
// answered, as JSON ({"answered": N, "asked": 4}). The fleet's tests build
// it without the race detector and run it as the non-member: plain text
// (no flags), or presenting a certificate (--cert, --key) while trusting
// --root-ca for the member's side. With a member certificate of the
// fleet's CA it is the control case that every request is answered.
//
//	fleetprobe --target HOST:PORT --runner ID [--root-ca F --cert F --key F]
//
// The submitted dispatch names --runner. It is not part of forged.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/ids"
)

func main() {
	target := flag.String("target", "", "the member's cluster address, host:port")
	runnerID := flag.String("runner", "", "the runner id the submitted dispatch names")
	rootCA := flag.String("root-ca", "", "CA certificate (PEM) trusted for the member's side; empty: plain text")
	certFile := flag.String("cert", "", "certificate (PEM) to present")
	keyFile := flag.String("key", "", "its key (PEM)")
	timeout := flag.Duration("timeout", 3*time.Second, "how long to wait for each answer")
	flag.Parse()
	if err := run(*target, *runnerID, *rootCA, *certFile, *keyFile, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetprobe:", err)
		os.Exit(1)
	}
}

func run(target, runnerID, rootCA, certFile, keyFile string, timeout time.Duration) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("--target %q: %w", target, err)
	}
	var opts []remote.ConfigOption
	if rootCA != "" {
		pem, err := os.ReadFile(rootCA)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--root-ca %s holds no certificate", rootCA)
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return err
		}
		server := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
		client := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: pool}
		opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(client))))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	r := remote.NewRemote(sys, remote.Configure(host, 0, opts...))
	r.Start()
	defer r.Shutdown(false)

	d := actortest.NewDispatch(time.Now().Add(time.Hour).UTC().Truncate(time.Second))
	d.Execution.RunnerID = runnerID
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	asked := []any{&fleetpb.StateRequest{}, &fleetpb.DirectoryRequest{}, &fleetpb.SubmitRequest{DispatchJson: raw},
		&fleetpb.CancelRequest{AttemptId: ids.NewUUID()}}
	answered := 0
	for _, msg := range asked {
		if _, err := sys.Root.RequestFuture(actor.NewPID(target, "forged-fleet"), msg, timeout).Result(); err == nil {
			answered++
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]int{"answered": answered, "asked": len(asked)})
}
