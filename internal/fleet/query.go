package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/forgedev/forged/internal/fleet/fleetpb"
)

// QueryDirectory asks the member at cfg.Advertise for the fleet's
// directory as it sees it, presenting cfg's member certificate: `forged
// fleet` on a member's host. It joins nothing. The member answers over a
// connection it dials back to this process (Proto.Actor's remote), so this
// listens, with the same mutual TLS, on the advertised host's address at a
// port of its own for the time of the query.
func QueryDirectory(ctx context.Context, cfg Config) ([]*fleetpb.MemberState, error) {
	if cfg.Advertise == "" {
		return nil, errors.New("config: fleetAdvertise: name the member to ask, host:port (--fleet-advertise)")
	}
	host, _, err := splitAdvertise(cfg.Advertise)
	if err != nil {
		return nil, err
	}
	if cfg.CAFile == "" || cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("config: fleetCa, fleetCert, fleetKey: the cluster port speaks mutual TLS; give the fleet CA and a member certificate and key")
	}
	serverTLS, clientTLS, err := cfg.tlsConfigs()
	if err != nil {
		return nil, err
	}
	opts := []remote.ConfigOption{remote.WithServerOptions(grpc.Creds(credentials.NewTLS(serverTLS))),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = 2 * DefaultRequestTimeout // the member asks every other one
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	defer system.Shutdown()
	r := remote.NewRemote(system, remote.Configure(host, 0, opts...))
	if err := startRemote(r); err != nil {
		return nil, fmt.Errorf("fleet: listen on %s: %w", host, err)
	}
	defer r.Shutdown(false)
	res, err := system.Root.RequestFuture(actor.NewPID(cfg.Advertise, actorName), &fleetpb.DirectoryRequest{}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: the member at %s did not answer within %s (is it running, and are the CA and certificate the fleet's?): %w", cfg.Advertise, timeout, err)
	}
	dir, ok := res.(*fleetpb.DirectoryResponse)
	if !ok {
		return nil, fmt.Errorf("fleet: unexpected answer %T", res)
	}
	return dir.GetMembers(), nil
}

// startRemote runs the remote's Start, which panics when it cannot listen.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}
