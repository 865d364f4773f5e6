package fleet

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/failure"
)

// A member learns that the fleet declared one of its attempts lost (its
// submitter saw it leave the member list: it was cut off from etcd past
// the membership TTL, or it restarted) from the attempt's fate key. The
// fence already keeps such an attempt from moving a branch at its import;
// watchFates stops it as soon as the record is seen instead of letting it
// run to its import: its worker and sidecars are torn down at once, and it
// ends here with sandbox_runner_lost, as it did for its submitter. It
// reads every fate of the fleet once (a member that restarted and
// re-adopted its attempts finds the losses recorded while it was away),
// then watches for new ones; a watch that fails (etcd compacted the
// revision, lost its leader, the member was cut off) is read again from
// the start after fateRelistEvery.
const fateRelistEvery = time.Second

// lostStopReason is the reason an attempt stopped by its loss record ends
// with, on this member.
const lostStopReason = "the fleet declared this attempt lost while this member was out of reach (its etcd lease expired); its submitter has ended it with sandbox_runner_lost, so it is stopped here and its result is never imported"

// watchFates runs until ctx ends (Leave cancels it), then closes done.
func (m *Member) watchFates(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	prefix := fateBaseKey + "/" + m.cfg.Name + "/"
	stopped := map[string]bool{}
	for {
		if rev, ok := m.readFates(ctx, prefix, stopped); ok {
			m.followFates(ctx, prefix, rev, stopped)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fateRelistEvery):
		}
	}
}

// readFates reads every fate of the fleet and stops this member's lost
// attempts among them; it returns the revision read at.
func (m *Member) readFates(ctx context.Context, prefix string, stopped map[string]bool) (int64, bool) {
	rctx, cancel := context.WithTimeout(ctx, fateTimeout)
	defer cancel()
	res, err := m.etcd.Get(rctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, false
	}
	for _, kv := range res.Kvs {
		m.onFate(strings.TrimPrefix(string(kv.Key), prefix), string(kv.Value), stopped)
	}
	return res.Header.Revision, true
}

// followFates watches the fates written after rev until the watch fails
// or ctx ends.
func (m *Member) followFates(ctx context.Context, prefix string, rev int64, stopped map[string]bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range m.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterDelete()) {
		if wr.Err() != nil {
			return
		}
		for _, ev := range wr.Events {
			m.onFate(strings.TrimPrefix(string(ev.Kv.Key), prefix), string(ev.Kv.Value), stopped)
		}
	}
}

// onFate stops attemptID here if its fate says this member lost it. Each
// attempt is stopped once per process (stopped remembers it); an attempt
// this runner does not have is remembered too, so a re-read skips it.
func (m *Member) onFate(attemptID, fate string, stopped map[string]bool) {
	if fate != fateLost+m.local.RunnerID() || stopped[attemptID] {
		return
	}
	stopped[attemptID] = true
	found, err := m.local.Abort(attemptID, failure.SandboxRunnerLost, lostStopReason)
	switch {
	case err != nil:
		// The runner did not answer; the fence still refuses the
		// attempt's import. Try again at the next read.
		delete(stopped, attemptID)
		m.logger.Warn("could not stop an attempt the fleet declared lost", "attempt", attemptID, "err", err)
	case found:
		m.logger.Warn("the fleet declared an attempt of this member lost: stopped", "attempt", attemptID)
	}
}
