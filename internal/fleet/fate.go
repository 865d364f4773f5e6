package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/failure"
)

// An attempt's fate in a fleet is one etcd key, written once, by whoever
// comes first: the member running the attempt claims it right before it
// moves a branch (claimed:RUNNER), or the submitter that saw that member
// leave the fleet declares it lost (lost:RUNNER). Both write only when the
// key does not exist (one etcd transaction), so a branch is moved only by
// an attempt that was not declared lost, and an attempt declared lost never
// moves one: its member, returning, finds the record and stops.
const (
	fateClaimed = "claimed:"
	fateLost    = "lost:"
)

// fateTimeout bounds one etcd transaction on a fate, and fateWait how long
// a member keeps retrying one that fails (etcd restarting) before it
// refuses to move the branch.
const (
	fateTimeout = 5 * time.Second
	fateWait    = 30 * time.Second
)

// fateRetention is how long etcd keeps a fate (an etcd lease on its key):
// longer than any attempt can run (the 8 h hard wall, its lease and the
// time a cut-off member may take to return), so a fate is never gone
// while either side may still read it, and etcd does not grow with every
// attempt the fleet ever ran.
const fateRetention = 48 * time.Hour

// fateBaseKey is the etcd prefix of the fates, outside the cluster
// provider's etcdBaseKey (which holds member records only: the provider
// reads every key below it as one).
const fateBaseKey = "/forged/fate"

func (m *Member) fateKey(attemptID string) string {
	return fateBaseKey + "/" + m.cfg.Name + "/" + attemptID
}

// settle writes value as the attempt's fate unless it has one, and
// returns the fate it has now.
func (m *Member) settle(ctx context.Context, attemptID, value string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, fateTimeout)
	defer cancel()
	key := m.fateKey(attemptID)
	// A lease granted for a fate that exists already is unused and
	// expires with its TTL.
	lease, err := m.etcd.Grant(ctx, int64(fateRetention/time.Second))
	if err != nil {
		return "", err
	}
	res, err := m.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", err
	}
	if res.Succeeded {
		return value, nil
	}
	kvs := res.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return "", fmt.Errorf("fleet: the fate of %s vanished", attemptID)
	}
	return string(kvs[0].Value), nil
}

// claim is the runner's fence (runner.Config.Fence): before this member
// moves a branch for attemptID it claims the attempt in etcd. It fails
// with sandbox_runner_lost when the fleet declared the attempt lost (this
// member was cut off past its membership TTL, and its submitter ended the
// attempt), and refuses too when etcd does not answer within fateWait: a
// member that cannot read the record must not act as if there were none.
func (m *Member) claim(ctx context.Context, attemptID string) error {
	self := fateClaimed + m.local.RunnerID()
	deadline := time.Now().Add(fateWait)
	for {
		fate, err := m.settle(ctx, attemptID, self)
		switch {
		case err == nil && fate == self:
			return nil
		case err == nil && strings.HasPrefix(fate, fateLost):
			m.logger.Warn("an attempt declared lost by the fleet is fenced: its branch is not moved", "attempt", attemptID)
			return failure.New(failure.SandboxRunnerLost, "the fleet declared the attempt lost while this member was cut off (its etcd lease expired); its result is not imported or published")
		case err == nil:
			return failure.New(failure.SandboxRunnerLost, "the attempt's fleet record is %q, not this member's claim; its result is not imported or published", fate)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return failure.New(failure.SandboxRunnerLost, "the fleet's record of the attempt could not be read from etcd within %s (%v); its result is not imported or published", fateWait, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// declareLost records that the attempt's member left the fleet, unless
// that member claimed it first. lost reports whether the attempt is now
// lost; false with no error means the member had claimed it (its result
// may be moving a branch): the submitter keeps waiting for its outcome.
func (m *Member) declareLost(attemptID, runnerID string) (lost bool, err error) {
	fate, err := m.settle(context.Background(), attemptID, fateLost+runnerID)
	if err != nil {
		return false, err
	}
	return strings.HasPrefix(fate, fateLost), nil
}

// Fence is the runner's veto (runner.Config.Fence) of a daemon that joins
// a fleet, made before the runner and so before the member: Check waits
// for the member Join attaches (a re-adopted attempt may reach its import
// while the daemon still joins), then claims the attempt.
type Fence struct {
	ready  chan struct{}
	member *Member
}

// NewFence returns a fence to give to the runner and then to Join.
func NewFence() *Fence { return &Fence{ready: make(chan struct{})} }

func (f *Fence) attach(m *Member) {
	f.member = m
	close(f.ready)
}

// Check claims attemptID for this member (see Member.claim).
func (f *Fence) Check(ctx context.Context, attemptID string) error {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return failure.New(failure.SandboxRunnerLost, "the daemon had not joined its fleet when the attempt was to move its branch; its result is not imported")
	}
	return f.member.claim(ctx, attemptID)
}
