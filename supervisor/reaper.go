package supervisor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// ReaperConfig configures the periodic reaper under the root supervisor.
type ReaperConfig struct {
	Store    ledger.Store
	Docker   reaper.Docker
	Round    reaper.Config // RunnerID, RunnerInstanceID, Grace; Live is set by the supervisor
	Interval time.Duration // default 1 minute
	Timeout  time.Duration // bound of one round; default 5 minutes
	// OnRound, when set, is told every finished round but dry runs (the
	// runner's metrics); it is called on the reaper's mailbox and must
	// not block.
	OnRound func(reaper.Round, error)
	// Images, when set, releases after each round the volume images of
	// attempts that are not live (those whose volumes the label path
	// removed without a ledger).
	Images ImageSweeper
}

// ImageSweeper releases the volume images of attempts that are not live
// (quota.Store).
type ImageSweeper interface {
	Sweep(ctx context.Context, live func(attemptHex string) bool) ([]string, error)
}

// ReapNow asks the reaper for one round now. Replied with ReapResult.
type ReapNow struct {
	DryRun bool
	// Snapshot, when set, is the server's list of this runner's live
	// attempts for this round (POST /v1/reap): the reaper keeps those and
	// reaps the rest by the seed's rule (reaper.ShouldReapLedger).
	Snapshot *reaper.Snapshot
}

// ReapResult is one round's account.
type ReapResult struct {
	Round reaper.Round
	Err   error
}

// liveSet is the set of attempts this process runs, read by the reaper's
// goroutine: an attempt is added before its actor is spawned (so before
// its first ledger write) and removed once its teardown has finished.
type liveSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newLiveSet() *liveSet { return &liveSet{ids: map[string]bool{}} }

func (s *liveSet) add(id string) {
	s.mu.Lock()
	s.ids[id] = true
	s.mu.Unlock()
}

func (s *liveSet) remove(id string) {
	s.mu.Lock()
	delete(s.ids, id)
	s.mu.Unlock()
}

func (s *liveSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

type reapTick struct{}

type roundDone struct {
	result    ReapResult
	requester *actor.PID
	dryRun    bool
}

// reaperActor runs reaper rounds on its own timer (re-armed after each
// round, so rounds never overlap) and on request.
// reaped tells the supervisor which attempts' ledgers a round reaped: a
// degraded attempt among them is degraded no more.
type reaped struct{ attemptIDs []string }

type reaperActor struct {
	cfg   ReaperConfig
	live  *liveSet
	clock clock.Clock

	runCtx  context.Context
	cancel  context.CancelFunc
	timer   clock.Timer
	running bool
	rounds  int
	last    ReapResult
	// maintenance is the host's verdict (allowed until told otherwise);
	// skipped counts the scheduled rounds it refused.
	maintenance messages.MaintenanceVerdict
	skipped     int
	// retries is how many more rounds run soon (retryIn apart, doubling)
	// while an attempt's leftovers remain (see leftovers); rerun asks for
	// one more round after the one running, which may have listed the
	// ledgers before the leftovers were recorded.
	retries int
	retryIn time.Duration
	rerun   bool
}

// leftovers tells the reaper that an attempt finished degraded: its
// teardown could not remove everything, typically because the engine was
// down or restarting. The reaper then runs a round at once and again soon
// after, backing off from firstRetry to maxRetry, until a round leaves no
// degraded attempt or leftoverRetries rounds have run: what is left is
// removed as soon as the engine answers again, not at the next scheduled
// round (a dockerd restart is often over before the host report notices
// it, so the maintenance verdict alone may never turn).
type leftovers struct{}

const (
	firstRetry      = time.Second
	maxRetry        = 30 * time.Second
	leftoverRetries = 16
)

// interval is the period between rounds.
func (c ReaperConfig) interval() time.Duration {
	if c.Interval <= 0 {
		return time.Minute
	}
	return c.Interval
}

func newReaperProps(cfg ReaperConfig, live *liveSet, clk clock.Clock) *actor.Props {
	cfg.Interval = cfg.interval()
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Round.Now == nil {
		cfg.Round.Now = clk.Now
	}
	// A panic in the reaper restarts it (its state is only counters and
	// the last round), so one bad round never ends periodic reaping.
	return actor.PropsFromProducer(func() actor.Actor {
		return &reaperActor{cfg: cfg, live: live, clock: clk, maintenance: messages.MaintenanceVerdict{Allowed: true}}
	})
}

func (r *reaperActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.runCtx, r.cancel = context.WithCancel(context.Background())
		r.arm(ctx)
	case *actor.Stopping, *actor.Restarting:
		if r.timer != nil {
			r.timer.Stop()
		}
		if r.cancel != nil {
			r.cancel()
		}
	case messages.MaintenanceVerdict:
		back := !r.maintenance.Allowed && msg.Allowed
		r.maintenance = msg
		if back {
			// The engine answers again (after a restart of dockerd, say):
			// what the attempts that ended with it left behind is reaped
			// now, not at the next scheduled round.
			r.round(ctx, false, nil, nil)
		}
	case leftovers:
		r.retries, r.retryIn = leftoverRetries, firstRetry
		if r.running {
			r.rerun = true
			return
		}
		if r.maintenance.Err() == nil {
			r.round(ctx, false, nil, nil)
		}
	case reapTick:
		r.timer = nil
		if err := r.maintenance.Err(); err != nil {
			r.skipped++
			r.arm(ctx)
			return
		}
		r.round(ctx, false, nil, nil)
	case ReapNow:
		if err := r.maintenance.Err(); err != nil {
			ctx.Respond(ReapResult{Err: err})
			return
		}
		r.round(ctx, msg.DryRun, msg.Snapshot, ctx.Sender())
	case roundDone:
		r.running = false
		r.rounds++
		r.last = msg.result
		if msg.result.Err != nil {
			ctx.Logger().Warn("reaper round failed", "err", msg.result.Err)
		} else if len(msg.result.Round.Reaped)+len(msg.result.Round.Removed)+len(msg.result.Round.Degraded) > 0 {
			ctx.Logger().Warn("reaper removed leaked resources", "reaped", msg.result.Round.Reaped,
				"removed", len(msg.result.Round.Removed), "degraded", msg.result.Round.Degraded)
		}
		if r.cfg.OnRound != nil && !msg.dryRun {
			r.cfg.OnRound(msg.result.Round, msg.result.Err)
		}
		if !msg.dryRun && len(msg.result.Round.Reaped) > 0 && ctx.Parent() != nil {
			ctx.Send(ctx.Parent(), reaped{attemptIDs: msg.result.Round.Reaped})
		}
		if msg.requester != nil {
			ctx.Send(msg.requester, msg.result)
		}
		r.armAfterRound(msg)
		r.arm(ctx)
	case actorkit.Panic:
		r.running = false
		r.last = ReapResult{Err: msg}
		r.arm(ctx)
	case messages.Inspect:
		phase := "idle"
		if r.running {
			phase = "reaping"
		}
		facts := map[string]string{"rounds": strconv.Itoa(r.rounds), "interval": r.cfg.Interval.String(),
			"lastReaped": strconv.Itoa(len(r.last.Round.Reaped)), "lastRemoved": strconv.Itoa(len(r.last.Round.Removed)),
			"lastDegraded": strconv.Itoa(len(r.last.Round.Degraded))}
		if r.last.Err != nil {
			facts["lastError"] = r.last.Err.Error()
		}
		if r.skipped > 0 {
			facts["skippedRounds"] = strconv.Itoa(r.skipped)
		}
		if !r.maintenance.Allowed {
			phase, facts["maintenance"] = "refused", "refused: "+string(r.maintenance.Code)
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: "reaper", Phase: phase, Facts: facts})
	}
}

// armAfterRound updates the leftovers' retries after a round: a clean
// one ends them, a failed one or one that left degraded attempts uses one.
func (r *reaperActor) armAfterRound(msg roundDone) {
	if msg.dryRun || r.retries == 0 {
		return
	}
	if r.rerun {
		r.rerun = false
		return
	}
	if msg.result.Err == nil && len(msg.result.Round.Degraded) == 0 {
		r.retries = 0
		return
	}
	r.retries--
}

// arm sets the timer of the next round: the scheduled interval, or sooner
// while leftovers are being retried.
func (r *reaperActor) arm(ctx actor.Context) {
	if r.timer != nil {
		r.timer.Stop()
	}
	after := r.cfg.Interval
	if r.retries > 0 && r.retryIn < after {
		after = r.retryIn
		r.retryIn = min(2*r.retryIn, maxRetry)
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	r.timer = r.clock.AfterFunc(after, func() { system.Root.Send(self, reapTick{}) })
}

// round runs one reaper round off the mailbox. A request that arrives
// while a round runs is refused rather than queued: rounds never overlap.
func (r *reaperActor) round(ctx actor.Context, dryRun bool, snapshot *reaper.Snapshot, requester *actor.PID) {
	if r.running {
		if requester != nil {
			ctx.Send(requester, ReapResult{Err: errRoundRunning})
		}
		return
	}
	r.running = true
	cfg := r.cfg.Round
	cfg.DryRun = dryRun
	cfg.Live = r.live.has
	snapshot.Apply(&cfg)
	store, docker, timeout, images, live := r.cfg.Store, r.cfg.Docker, r.cfg.Timeout, r.cfg.Images, r.live
	actorkit.Go(ctx, r.runCtx, "reaper round", func(runCtx context.Context) any {
		roundCtx, cancel := context.WithTimeout(runCtx, timeout)
		defer cancel()
		round, err := reaper.Run(roundCtx, cfg, store, docker)
		if images != nil && !dryRun {
			// An attempt is live from before its first ledger write, so
			// before it makes an image: only leftovers are released.
			_, serr := images.Sweep(roundCtx, func(hex string) bool {
				id, ok := ids.UUIDFromHex(hex)
				return ok && live.has(id)
			})
			err = errors.Join(err, serr)
		}
		return roundDone{result: ReapResult{Round: round, Err: err}, requester: requester, dryRun: dryRun}
	})
}

type roundRunningError struct{}

func (roundRunningError) Error() string { return "a reaper round is already running" }

var errRoundRunning error = roundRunningError{}
