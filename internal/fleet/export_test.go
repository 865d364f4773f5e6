package fleet

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
