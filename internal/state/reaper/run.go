package reaper

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/teardown"
	"github.com/forgedev/forged/messages"
)

// sweep is the state of one round in progress.
type sweep struct {
	cfg    Config
	store  ledger.Store
	docker Docker
	grace  time.Duration
	// servers indexes the snapshot by attempt id (empty without one).
	servers map[string]ServerAttempt
	// kept holds the attempts whose ledger the round decided to keep.
	kept map[string]bool
	// wouldReap holds the ownerships a dry run would tear down.
	wouldReap map[dockerops.Ownership]bool
	// predecessors holds the other runner instances that left ledgers in
	// this state root: they are dead (ShouldReapLedger's premise).
	predecessors map[string]bool
	round        Round
	errs         []error
}

// Run performs one round: ledgers first, then labels (see the package
// documentation). It returns the round's account and an error when the
// round itself could not complete: invalid identities, unreadable ledger
// directory, engine listing, ledger or report writes, or ctx ending.
// Teardown and removal failures are not errors of the round: they are
// listed in Round.Degraded and their reports stored.
func Run(ctx context.Context, cfg Config, store ledger.Store, docker Docker) (Round, error) {
	if !messages.IsFullUUID(cfg.RunnerID) || !messages.IsFullUUID(cfg.RunnerInstanceID) {
		return Round{}, failure.New(CodeConfigInvalid, "runner id and runner instance id must be full lowercase UUIDs")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &sweep{
		cfg:       cfg,
		store:     store,
		docker:    docker,
		grace:     cfg.Grace,
		servers:   map[string]ServerAttempt{},
		kept:      map[string]bool{},
		wouldReap: map[dockerops.Ownership]bool{},

		predecessors: map[string]bool{},
	}
	switch {
	case s.grace == 0:
		s.grace = DefaultGrace
	case s.grace < 0:
		s.grace = 0
	}
	if cfg.SnapshotAvailable {
		for _, a := range cfg.ServerSnapshot {
			s.servers[a.AttemptID] = a
		}
	}
	s.round.Started = cfg.Now()

	if err := s.ledgers(ctx); err != nil {
		return s.round, errors.Join(append(s.errs, err)...)
	}
	if err := s.labels(ctx); err != nil {
		return s.round, errors.Join(append(s.errs, err)...)
	}
	if err := s.workDirs(); err != nil {
		s.errs = append(s.errs, err)
	}
	s.buildCgroups()
	if a := cfg.Audit; a != nil {
		audit, err := imagegc.PurgeAudit(a.StateRoot, imagegc.Request{Policy: a.Policy, Refs: a.Refs, Now: s.round.Started, DryRun: cfg.DryRun})
		s.round.Audit = &audit
		if err != nil {
			s.errs = append(s.errs, err)
		}
	}
	return s.round, errors.Join(s.errs...)
}

// live reports whether this process runs the attempt.
func (s *sweep) live(attemptID string) bool {
	return s.cfg.Live != nil && s.cfg.Live(attemptID)
}

// ledgers is the first phase: reap what the ledgers say is dead.
func (s *sweep) ledgers(ctx context.Context) error {
	entries, corrupt, err := s.store.List()
	if err != nil {
		return err
	}
	s.round.Corrupt = corrupt
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.RunnerID != s.cfg.RunnerID {
			s.skip(e.AttemptID, Object{}, SkipForeignRunner)
			continue
		}
		if e.RunnerInstanceID != s.cfg.RunnerInstanceID {
			s.predecessors[e.RunnerInstanceID] = true
		}
		if s.live(e.AttemptID) {
			s.kept[e.AttemptID] = true
			s.skip(e.AttemptID, Object{}, SkipLive)
			continue
		}
		if !s.shouldReap(e) {
			s.kept[e.AttemptID] = true
			s.skip(e.AttemptID, Object{}, SkipLeaseCurrent)
			continue
		}
		if s.cfg.DryRun {
			s.round.WouldReap = append(s.round.WouldReap, e.AttemptID)
			s.wouldReap[ownershipOf(e)] = true
			continue
		}
		s.reapLedger(ctx, e)
	}
	return nil
}

// shouldReap applies ShouldReapLedger, and also reaps, whatever its
// lease, a ledger whose attempt already went through teardown and that
// this process is not running: degraded (the teardown failed; it is
// retried) or released (forged stopped before removing the ledger).
func (s *sweep) shouldReap(e ledger.Entry) bool {
	if e.State == ledger.Degraded || e.State == ledger.Released {
		return true
	}
	var server *ServerAttempt
	if a, ok := s.servers[e.AttemptID]; ok {
		server = &a
	}
	return ShouldReapLedger(e, s.cfg.RunnerInstanceID, server, s.cfg.SnapshotAvailable, s.round.Started)
}

// reapLedger releases one attempt by its ledger through the one teardown
// operation (internal/teardown): releasing is recorded, the objects are
// removed, the report is stored, and only then is the ledger removed. On
// failure the ledger is kept as degraded for the next round.
func (s *sweep) reapLedger(ctx context.Context, e ledger.Entry) {
	res := teardown.Release(ctx, s.docker, s.store, teardown.Request{Owner: ownershipOf(e), Source: ledger.SourceReaper, Ledger: &e})
	for _, err := range []error{res.ReleasingErr, res.LedgerErr} {
		if err != nil {
			s.errs = append(s.errs, err)
		}
	}
	if res.Persisted && len(res.Report.Actions) > 0 {
		s.round.Reports = append(s.round.Reports, res.Report)
	}
	if !res.Persisted {
		s.errs = append(s.errs, res.Err)
	}
	switch {
	case res.Err != nil:
		s.markDegraded(e.AttemptID)
	case res.Removed():
		s.round.Reaped = append(s.round.Reaped, e.AttemptID)
	}
}

// markDegraded lists an attempt as degraded once.
func (s *sweep) markDegraded(attemptID string) {
	if !slices.Contains(s.round.Degraded, attemptID) {
		s.round.Degraded = append(s.round.Degraded, attemptID)
	}
}

// skip records something left alone.
func (s *sweep) skip(attemptID string, obj Object, reason SkipReason) {
	s.round.Skipped = append(s.round.Skipped, Skip{AttemptID: attemptID, Object: obj, Reason: reason})
}

// ownershipOf is the exact ownership a ledger records.
func ownershipOf(e ledger.Entry) dockerops.Ownership {
	return dockerops.Ownership{
		AttemptID:        e.AttemptID,
		ExecutionLeaseID: e.ExecutionLeaseID,
		RunnerID:         e.RunnerID,
		RunnerInstanceID: e.RunnerInstanceID,
		FencingToken:     e.FencingToken,
	}
}
