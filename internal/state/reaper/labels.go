package reaper

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
)

// labels is the second phase: remove the managed objects of this runner
// that no live attempt owns (see the package documentation).
func (s *sweep) labels(ctx context.Context) error {
	objs, err := s.docker.ListManaged(ctx)
	if err != nil {
		return failure.Wrap(CodeListFailed, err, "list managed Docker objects")
	}
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b Object) int {
		if d := kindOrder[a.Kind] - kindOrder[b.Kind]; d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	var log actionLog
	defer func() { s.storeActions(log) }()
	// Judge every object first, then remove kind by kind (containers,
	// then networks, then volumes), the objects of one kind in parallel.
	var batch []removal
	for _, obj := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(batch) > 0 && batch[0].obj.Kind != obj.Kind {
			if err := s.removeBatch(ctx, batch, &log); err != nil {
				return err
			}
			batch = nil
		}
		owner, reason := s.judge(obj)
		if reason != "" {
			s.skip(owner.AttemptID, obj, reason)
			continue
		}
		if s.cfg.DryRun {
			s.round.WouldRemove = append(s.round.WouldRemove, obj)
			continue
		}
		batch = append(batch, removal{owner: owner, obj: obj})
	}
	return s.removeBatch(ctx, batch, &log)
}

// removalWorkers bounds the removals of one kind that run at once: the
// engine serializes much of the work, and beyond a few the calls only
// queue there.
const removalWorkers = 8

// removal is one object the round removes, with its owner.
type removal struct {
	owner dockerops.Ownership
	obj   Object
	err   error
}

// removeBatch removes objects of one kind, removalWorkers at a time, then
// records the outcomes in order. An object whose attempt started since it
// was judged is left alone.
func (s *sweep) removeBatch(ctx context.Context, batch []removal, log *actionLog) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var todo []*removal
	for i := range batch {
		if s.live(batch[i].owner.AttemptID) { // it may have started since judge
			s.skip(batch[i].owner.AttemptID, batch[i].obj, SkipLive)
			continue
		}
		todo = append(todo, &batch[i])
	}
	work := make(chan *removal)
	var wg sync.WaitGroup
	for range min(removalWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				r.err = s.docker.RemoveManaged(ctx, r.obj)
			}
		}()
	}
	for _, r := range todo {
		work <- r
	}
	close(work)
	wg.Wait()
	for _, r := range todo {
		log.record(r.owner, r.obj, r.err, s.cfg.Now())
		if r.err != nil {
			s.markDegraded(r.owner.AttemptID)
		} else {
			s.round.Removed = append(s.round.Removed, r.obj)
		}
	}
	return nil
}

// judge decides whether obj may be removed: it returns the ownership its
// labels record and an empty reason, or why it must be left alone.
func (s *sweep) judge(obj Object) (dockerops.Ownership, SkipReason) {
	if _, ok := kindOrder[obj.Kind]; !ok || obj.ID == "" {
		return dockerops.Ownership{}, SkipUnknownObjectKind
	}
	if obj.Labels[dockerops.LabelRunnerID] != s.cfg.RunnerID {
		return dockerops.Ownership{}, SkipForeignRunner
	}
	owner, ok := dockerops.OwnershipFromLabels(obj.Labels)
	if !ok || owner.RunnerID != s.cfg.RunnerID {
		return dockerops.Ownership{}, SkipIncompleteLabels
	}
	if s.wouldReap[owner] {
		return owner, "" // a dry run's ledger teardown would remove it
	}
	switch {
	case s.live(owner.AttemptID):
		return owner, SkipLive
	case s.kept[owner.AttemptID]:
		return owner, SkipLeaseCurrent
	case s.serverHolds(owner):
		return owner, SkipServerHolds
	case owner.RunnerInstanceID != s.cfg.RunnerInstanceID && !s.cfg.SnapshotAvailable &&
		!s.predecessors[owner.RunnerInstanceID] && !s.initialLeaseOver(obj):
		return owner, SkipForeignInstance
	}
	if reason := s.ageReason(obj); reason != "" {
		return owner, reason
	}
	if !dockerops.MayReap(obj.Labels, s.cfg.RunnerID, s.protected) {
		return owner, SkipIncompleteLabels
	}
	return owner, ""
}

// protected reports whether an attempt is live or kept by its ledger.
func (s *sweep) protected(attemptID string) bool {
	return s.live(attemptID) || s.kept[attemptID]
}

// serverHolds reports whether the server's snapshot holds the attempt live
// (unexpired) for this process or for the instance that labelled it.
func (s *sweep) serverHolds(owner dockerops.Ownership) bool {
	a, ok := s.servers[owner.AttemptID]
	if !ok || !a.ExpiresAt.After(s.round.Started) {
		return false
	}
	return a.RunnerInstanceID == s.cfg.RunnerInstanceID || a.RunnerInstanceID == owner.RunnerInstanceID
}

// initialLeaseOver reports whether the attempt's initial lease expiry,
// recorded in its labels, has passed.
func (s *sweep) initialLeaseOver(obj Object) bool {
	t, err := time.Parse(time.RFC3339Nano, obj.Labels[dockerops.LabelInitialExpiresAt])
	return err == nil && !t.After(s.round.Started)
}

// ageReason says why obj is too recent to remove, or "" when it was
// created before the round began and at least the grace period before.
// A timestamp without a fraction of a second may have been truncated, so
// the object may have been created up to a second later.
func (s *sweep) ageReason(obj Object) SkipReason {
	if obj.Created.IsZero() {
		return SkipUnknownAge
	}
	latest := obj.Created
	if latest.Nanosecond() == 0 {
		latest = latest.Add(time.Second - time.Nanosecond)
	}
	switch {
	case !latest.Before(s.round.Started):
		return SkipNotBeforeSweep
	case s.round.Started.Sub(latest) < s.grace:
		return SkipTooYoung
	}
	return ""
}
