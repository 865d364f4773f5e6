package fleet

import (
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/cluster"
	etcdprovider "github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
)

// lazyEtcd is the cluster's etcd provider, created only when the cluster
// starts the member, after its remote: the remote's start replaces gRPC's
// process-wide logger, which must happen before any gRPC client (the etcd
// client's) runs, or the two race.
type lazyEtcd struct {
	cfg   Config
	inner *etcdprovider.Provider
}

func (p *lazyEtcd) start(c *cluster.Cluster, member bool) error {
	if err := probeEtcd(p.cfg); err != nil {
		return err
	}
	etcdCfg, err := p.cfg.etcdClientConfig(etcdDialTimeout)
	if err != nil {
		return err
	}
	inner, err := etcdprovider.NewWithConfig(etcdBaseKey, etcdCfg)
	if err != nil {
		return fmt.Errorf("fleet: etcd client: %w", err)
	}
	p.inner = inner
	if member {
		return inner.StartMember(c)
	}
	return inner.StartClient(c)
}

func (p *lazyEtcd) StartMember(c *cluster.Cluster) error { return p.start(c, true) }
func (p *lazyEtcd) StartClient(c *cluster.Cluster) error { return p.start(c, false) }

func (p *lazyEtcd) Shutdown(graceful bool) error {
	if p.inner == nil {
		return nil
	}
	return p.inner.Shutdown(graceful)
}

// memberRef is one listed cluster member.
type memberRef struct {
	ID, Address string
}

// topology is this member's copy of the cluster's member list, taken from
// the ClusterTopology events the cluster publishes (on the provider's
// goroutine, synchronously): the member list itself is not safe to read
// from other goroutines.
type topology struct {
	mu      sync.Mutex
	members []memberRef
}

func (t *topology) observe(ev any) {
	top, ok := ev.(*cluster.ClusterTopology)
	if !ok {
		return
	}
	refs := make([]memberRef, 0, len(top.Members))
	for _, m := range top.Members {
		refs = append(refs, memberRef{ID: m.Id, Address: m.Address()})
	}
	t.mu.Lock()
	t.members = refs
	t.mu.Unlock()
}

func (t *topology) list() []memberRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]memberRef(nil), t.members...)
}

func (t *topology) contains(id string) bool {
	for _, m := range t.list() {
		if m.ID == id {
			return true
		}
	}
	return false
}
