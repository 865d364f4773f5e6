package fleet

import (
	"io"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/internal/fleet/fleetpb"
)

// Choose and StateOf are placement's choice and a runner's directory
// entry, for the in-process tests (no cluster).
var (
	Choose  = choose
	StateOf = stateOf
)

// DirectoryView is the API's form of a directory read.
var DirectoryView = directoryView

// ProbeEtcd is the join's probe of etcd.
var ProbeEtcd = probeEtcd

// EtcdClientConfig is the configuration of a member's etcd clients.
func (c Config) EtcdClientConfig(dial time.Duration) (clientv3.Config, error) {
	return c.etcdClientConfig(dial)
}

// SubmitHere is a member's admission of a forwarded dispatch (the fleet
// actor's SubmitRequest) on local, without a cluster.
func SubmitHere(local Local, req *fleetpb.SubmitRequest) *fleetpb.SubmitResponse {
	m := &Member{local: local, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return m.submitHere(req)
}
