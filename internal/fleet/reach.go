package fleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/failure"
)

// A member cut off from etcd stops admitting new work. Past the etcd
// provider's membership TTL without etcd, the others may already list it
// gone and declare its forwarded attempts lost (fate.go): new work taken
// now would be lost the same way. So a member probes etcd every
// reachEvery with a linearizable read (it needs a quorum: a member that
// reaches only a minority is cut off too), and once no probe succeeded
// for cutOffAfter, it holds its runner's admission
// (fleet_member_cut_off) until a probe succeeds again. The attempts it
// runs go on; the fence decides their results. Losing etcd altogether
// thus stops admission (and placement) everywhere, never the attempts
// already running.
const (
	reachEvery   = time.Second
	reachTimeout = time.Second
	// cutOffAfter is the etcd provider's membership TTL (3 s, its default).
	cutOffAfter = 3 * time.Second
)

// reach is the state of the probes: when one last succeeded, and whether
// the member counts as cut off.
type reach struct {
	lastOK time.Time
	cut    bool
}

// observe records one probe that ended at now (ok: etcd answered) and
// reports whether the member is cut off now and whether that changed.
func (r *reach) observe(ok bool, now time.Time) (cut, changed bool) {
	if ok {
		r.lastOK = now
	}
	cut = now.Sub(r.lastOK) > cutOffAfter
	changed = cut != r.cut
	r.cut = cut
	return cut, changed
}

// watchReach probes etcd until stop is closed, and holds or releases the
// local runner's admission as the member gets cut off or reaches etcd
// again. It closes done when it returns.
func (m *Member) watchReach(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	r := reach{lastOK: time.Now()}
	tick := time.NewTicker(reachEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
		_, err := m.etcd.Get(ctx, fateBaseKey+"/"+m.cfg.Name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		cut, changed := r.observe(err == nil, time.Now())
		switch {
		case !changed:
		case cut:
			m.cutOff.Store(true)
			m.local.HoldAdmission(failure.FleetMemberCutOff, fmt.Sprintf(
				"fleet member %s has not reached etcd since %s (%v): it admits no new work until etcd answers again; retry on another member",
				m.local.RunnerID(), r.lastOK.UTC().Format(time.RFC3339), err))
		default:
			m.cutOff.Store(false)
			m.local.ReleaseAdmission()
		}
	}
}
