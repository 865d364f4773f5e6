package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/collector"
	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/teardown"
	"github.com/forgedev/forged/messages"
)

// AttemptFactory returns the props of one attempt actor, which runs its
// sandbox as user (its slot's uid, see uids.go; the zero user without
// Config.UIDBase).
type AttemptFactory func(d *messages.Dispatch, user messages.SandboxUser, subscriber, supervisor *actor.PID) *actor.Props

// Cleaner removes a crashed attempt's resources by their labels.
type Cleaner = teardown.Docker

// Ledgers is where a crashed attempt's ledger is read and released, and its
// cleanup report persisted (ledger.Store).
type Ledgers interface {
	teardown.Store
	Read(attemptID string) (ledger.Entry, error)
}

// Config configures the root supervisor.
type Config struct {
	// Slots is how many attempts may run at once.
	Slots int
	// UIDBase, when set, is the first of Slots sandbox uids (see uids.go):
	// each admitted attempt runs as its own. 0 gives every attempt the
	// zero user, which runs as messages.ImageUser (tests).
	UIDBase int
	// QueueLimit is how many admitted-but-waiting attempts may queue.
	QueueLimit int
	// BuildPermits is how many image builds may run at once (at most one
	// per image key); 0 means 1.
	BuildPermits int
	// NewAttempt builds an attempt's props.
	NewAttempt AttemptFactory
	// Cleaner tears down crashed attempts, through the one teardown
	// operation (internal/teardown) with Ledgers: the report is persisted
	// and the crashed attempt's ledger released or kept degraded.
	Cleaner Cleaner
	Ledgers Ledgers
	// Capacity, when set, bounds Slots by the host's preflight capacity.
	// It is refreshed every RefreshInterval and at admission when older
	// than CapacityTTL; while the host is unavailable, admission is
	// refused with the preflight code.
	Capacity        CapacitySource
	RefreshInterval time.Duration
	CapacityTTL     time.Duration
	// RunnerID, when set, is this runner's id: dispatches for another
	// runner are refused, and the reaper only touches this id.
	RunnerID string
	// Reaper, when set, runs as a child of the supervisor on a timer.
	Reaper *ReaperConfig
	// Clock drives the capacity refresh and the reaper's timers and
	// stamps the outcomes the supervisor writes; nil means clock.System.
	Clock clock.Clock
	// Collector, when set, is the image collector's props (package
	// collector): the supervisor runs it as a child, restarted like the
	// reaper, and forwards collector.CollectNow to it.
	Collector *actor.Props
	// ManagedNS, when set, is the ref prefix every dispatch's worktree key
	// must lie below (see messages.Dispatch.ValidateManagedRef).
	ManagedNS string
	// Adopt, when set, returns the attempts a previous forged process left
	// running that this one re-adopts (see Adoption). It is called once,
	// when the supervisor starts, before its reaper and before any
	// admission: each adopted attempt holds its slot and is live first.
	Adopt func(system *actor.ActorSystem) []Adoption
}

// Adoption is one re-adopted attempt: its dispatch, the sandbox user its
// ledger recorded (zero: messages.ImageUser, a ledger from before users
// were recorded), the subscriber of its events, and its attempt actor's
// props.
type Adoption struct {
	Dispatch   *messages.Dispatch
	User       messages.SandboxUser
	Subscriber *actor.PID
	NewAttempt func(subscriber, supervisor *actor.PID) *actor.Props
}

// Props returns the root supervisor's props.
func Props(cfg Config) *actor.Props {
	if cfg.CapacityTTL <= 0 {
		cfg.CapacityTTL = preflight.DefaultTTL
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = cfg.CapacityTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Cleaner != nil && cfg.Ledgers == nil {
		panic("supervisor: a Cleaner needs Ledgers to persist crashed attempts' reports")
	}
	strategy := &rootStrategy{}
	return actor.PropsFromProducer(func() actor.Actor { return newRoot(cfg, strategy) }, actor.WithSupervisor(strategy))
}

type pending struct {
	dispatch   *messages.Dispatch
	subscriber *actor.PID
}

type running struct {
	dispatch   *messages.Dispatch
	need       need // held against the host's budget until the attempt finishes
	subscriber *actor.PID
	pid        *actor.PID
	phase      string
	crashed    bool
}

type root struct {
	cfg      Config
	strategy *rootStrategy
	queue    []pending
	// inQueue holds the queued attempt ids: the duplicate check at
	// admission is a lookup, not a scan of the queue.
	inQueue map[string]struct{}
	running map[string]*running // by attempt id
	byPID   map[string]string   // attempt actor id → attempt id
	// degraded holds the attempts that finished degraded and that no
	// reaper round has reaped since; degradedTotal counts them all.
	degraded      map[string]bool
	degradedTotal int

	permit   *permit
	capacity *capacity
	uids     *uidSlots
	// maintenance is the last verdict sent to the reaper and collector.
	maintenance *messages.MaintenanceVerdict
	live        *liveSet
	reaper      *actor.PID
	gc          *actor.PID // the image collector; nil: off, or failed beyond its bounds
	// reaperRespawn is armed while no reaper runs.
	reaperRespawn clock.Timer
	runCtx        context.Context
	cancel        context.CancelFunc
	stopped       bool
}

type crashCleanupDone struct {
	attemptID string
	result    teardown.Result
	ledgerErr error // the crashed attempt's ledger could not be read
}

func newRoot(cfg Config, strategy *rootStrategy) *root {
	return &root{cfg: cfg, strategy: strategy, running: map[string]*running{}, degraded: map[string]bool{}, inQueue: map[string]struct{}{}, byPID: map[string]string{}, permit: newPermit(cfg.BuildPermits), live: newLiveSet(), uids: newUIDSlots(cfg.UIDBase, cfg.Slots),
		capacity: &capacity{clock: cfg.Clock, source: cfg.Capacity, interval: cfg.RefreshInterval, ttl: cfg.CapacityTTL}}
}

func (r *root) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.runCtx, r.cancel = context.WithCancel(context.Background())
		r.capacity.start(ctx, r.runCtx)
		if r.cfg.Adopt != nil {
			for _, a := range r.cfg.Adopt(ctx.ActorSystem()) {
				r.adopt(ctx, a)
			}
		}
		r.spawnReaper(ctx)
		r.spawnCollector(ctx)
		r.tellMaintenance(ctx)
	case *actor.Stopping:
		r.stopped = true
		r.capacity.stop()
		if r.reaperRespawn != nil {
			r.reaperRespawn.Stop()
		}
		r.cancel()
	case refreshTick:
		r.capacity.refresh(ctx, r.runCtx)
	case capacityRefreshed:
		r.capacity.record(ctx, msg.report)
		r.tellMaintenance(ctx)
		if !msg.report.Available {
			r.refuseQueued(ctx, msg.report)
		}
		r.admit(ctx)
	case messages.SubmitAttempt:
		ctx.Respond(r.submit(ctx, msg))
	case messages.CancelAttempt:
		ctx.Respond(r.cancelAttempt(ctx, msg))
	case messages.RenewLease:
		if att, ok := r.running[msg.AttemptID]; ok {
			ctx.Forward(att.pid) // the attempt answers the requester
			return
		}
		ctx.Respond(messages.RenewLeaseReply{AttemptID: msg.AttemptID, Code: string(failure.AttemptNotFound), Message: "no such running attempt"})
	case messages.SnapshotRequest:
		ctx.Respond(r.snapshot())
	case messages.AttemptPhaseChanged:
		if att, ok := r.running[msg.AttemptID]; ok {
			att.phase = msg.Phase
		}
	case messages.AttemptFinished:
		r.finish(ctx, msg.Outcome.AttemptID, msg.Outcome.Degraded)
	case ReapNow:
		if r.reaper == nil {
			err := errNoReaper
			if r.cfg.Reaper != nil {
				err = errReaperRespawning
			}
			ctx.Respond(ReapResult{Err: err})
			return
		}
		ctx.Forward(r.reaper)
	case collector.CollectNow:
		if r.gc == nil {
			ctx.Respond(collector.CollectReply{Err: errNoCollector})
			return
		}
		ctx.Forward(r.gc)
	case messages.AcquireBuildPermit:
		r.permit.acquire(ctx, ctx.Sender(), msg.Key)
	case messages.ReleaseBuildPermit:
		r.permit.release(ctx, ctx.Sender())
	case messages.HandOverBuildPermit:
		ctx.Respond(messages.BuildPermitHandedOver{HandedOver: r.permit.handOver(ctx, ctx.Sender(), msg.Build)})
	case *actor.Terminated:
		// A system message that can overtake the child's last user
		// messages (AttemptFinished): permits are released at once, but an
		// attempt is judged crashed only once its queued messages are in.
		r.permit.forget(ctx, msg.Who)
		ctx.Send(ctx.Self(), attemptGone{who: msg.Who})
	case attemptGone:
		if msg.who.Equal(r.reaper) {
			r.onReaperGone(ctx)
			return
		}
		if msg.who.Equal(r.gc) {
			r.gc, r.strategy.collector = nil, nil
			if !r.stopped {
				ctx.Logger().Error("the image collector failed beyond its restart bounds; image collection is off until forged restarts")
			}
			return
		}
		r.onAttemptGone(ctx, msg.who)
	case reaped:
		for _, id := range msg.attemptIDs {
			delete(r.degraded, id)
		}
	case respawnReaper:
		r.spawnReaper(ctx)
	case crashCleanupDone:
		r.onCrashCleaned(ctx, msg)
	case actorkit.Panic:
		ctx.Logger().Error("supervisor step panicked", "step", msg.Step, "panic", fmt.Sprint(msg.Value))
	case messages.Inspect:
		ctx.Respond(r.inspect(ctx))
	}
}

func (r *root) submit(ctx actor.Context, msg messages.SubmitAttempt) messages.SubmitReply {
	d := msg.Dispatch
	if d == nil {
		return refuse("", failure.DispatchInvalid, "no dispatch")
	}
	id := d.AttemptID()
	if err := d.Validate(); err != nil {
		return refuse(id, failure.CodeOf(err), err.Error())
	}
	if r.cfg.ManagedNS != "" {
		if err := d.ValidateManagedRef(r.cfg.ManagedNS); err != nil {
			return refuse(id, failure.CodeOf(err), err.Error())
		}
	}
	if r.cfg.RunnerID != "" && d.Execution.RunnerID != r.cfg.RunnerID {
		// The ids go to the operator's log only: the refusal reaches whoever
		// submitted, and this runner's id is what a forged dispatch needs.
		ctx.Logger().Warn("refused a dispatch for another runner", "attempt", id, "dispatchRunner", d.Execution.RunnerID, "runner", r.cfg.RunnerID)
		return refuse(id, failure.DispatchWrongRunner, "the dispatch names another runner than this one (execution.runnerId)")
	}
	if r.stopped {
		return refuse(id, failure.SupervisorShuttingDown, "the supervisor is stopping")
	}
	_, isQueued := r.inQueue[id]
	if _, ok := r.running[id]; ok || isQueued {
		return refuse(id, failure.AttemptDuplicate, fmt.Sprintf("attempt %s is already admitted", id))
	}
	if r.capacity.source != nil {
		if r.capacity.stale(r.cfg.Clock.Now()) {
			r.capacity.refresh(ctx, r.runCtx)
		}
		if rep := r.capacity.report; rep != nil && !rep.Available {
			return refuse(id, rep.Code, rep.Reason)
		}
	}
	budget := budgetOf(r.capacity.report)
	if why := budget.neverFits(d); why != "" {
		return refuse(id, failure.DispatchExceedsHost, why)
	}
	// FIFO: nobody overtakes a waiting attempt, so a large dispatch is not
	// starved by a stream of small ones.
	if len(r.queue) == 0 && r.canStart(budget, d) {
		r.spawn(ctx, pending{dispatch: d, subscriber: msg.Subscriber})
		return messages.SubmitReply{AttemptID: id, Accepted: true}
	}
	if len(r.queue) < r.cfg.QueueLimit {
		r.queue = append(r.queue, pending{dispatch: d, subscriber: msg.Subscriber})
		r.inQueue[id] = struct{}{}
		return messages.SubmitReply{AttemptID: id, Accepted: true, Queued: true}
	}
	return refuse(id, failure.CapacityExhausted, fmt.Sprintf("the %d slots or the host's budget are taken and the queue of %d is full", r.slots(), r.cfg.QueueLimit))
}

type noReaperError struct{}

func (noReaperError) Error() string { return "this supervisor runs no reaper" }

var errNoReaper error = noReaperError{}

// errReaperRespawning answers ReapNow between a reaper stopped beyond its
// restart bounds and its replacement.
var errReaperRespawning = errors.New("the reaper failed and is being replaced; retry after its interval")

func refuse(id string, code failure.Code, message string) messages.SubmitReply {
	return messages.SubmitReply{AttemptID: id, Code: string(code), Message: message}
}

func (r *root) queued(id string) int {
	for i, p := range r.queue {
		if p.dispatch.AttemptID() == id {
			return i
		}
	}
	return -1
}

func (r *root) spawn(ctx actor.Context, p pending) {
	id := p.dispatch.AttemptID()
	user, ok := r.uids.take(id)
	if !ok {
		// Adoptions beyond the slots hold every uid of the range.
		notify(ctx, p.subscriber, r.failedOutcome(id, failure.CapacityExhausted, "every sandbox uid of the range is held by a running attempt", false))
		return
	}
	r.live.add(id) // before the attempt can write its ledger
	pid, err := ctx.SpawnNamed(r.cfg.NewAttempt(p.dispatch, user, p.subscriber, ctx.Self()), "attempt-"+strings.ReplaceAll(id, "-", ""))
	if err != nil {
		// Only a name clash can fail here; report it as the attempt's outcome.
		r.live.remove(id)
		r.uids.release(id)
		notify(ctx, p.subscriber, r.failedOutcome(id, failure.AttemptDuplicate, err.Error(), false))
		return
	}
	r.running[id] = &running{dispatch: p.dispatch, need: needOf(p.dispatch), subscriber: p.subscriber, pid: pid, phase: messages.PhaseAdmitted}
	r.byPID[pid.GetId()] = id
}

// adopt re-holds a slot for an attempt a previous process left running
// and spawns its attempt actor, whatever the capacity says: the attempt
// is already running on this host.
func (r *root) adopt(ctx actor.Context, a Adoption) {
	id := a.Dispatch.AttemptID()
	if _, ok := r.running[id]; ok {
		return
	}
	r.live.add(id)
	// The adopted sandbox runs as the user its ledger recorded: it keeps
	// that uid (and so its slot) until it finishes.
	if !r.uids.hold(id, a.User.OrImage()) {
		ctx.Logger().Warn("a re-adopted attempt runs as a sandbox uid another live attempt holds", "attempt", id, "uid", a.User.OrImage().UID)
	}
	pid, err := ctx.SpawnNamed(a.NewAttempt(a.Subscriber, ctx.Self()), "attempt-"+strings.ReplaceAll(id, "-", ""))
	if err != nil {
		r.live.remove(id)
		r.uids.release(id)
		notify(ctx, a.Subscriber, r.failedOutcome(id, failure.AttemptDuplicate, err.Error(), false))
		return
	}
	r.running[id] = &running{dispatch: a.Dispatch, need: needOf(a.Dispatch), subscriber: a.Subscriber, pid: pid, phase: messages.PhaseRunning}
	r.byPID[pid.GetId()] = id
}

// admit starts queued attempts, FIFO, while the head of the queue fits: a
// free slot and room in the host's budget beside what the admitted
// attempts hold.
func (r *root) admit(ctx actor.Context) {
	budget := budgetOf(r.capacity.report)
	for len(r.queue) > 0 && !r.stopped && r.canStart(budget, r.queue[0].dispatch) {
		next := r.queue[0]
		r.queue = r.queue[1:]
		delete(r.inQueue, next.dispatch.AttemptID())
		r.spawn(ctx, next)
	}
}

// canStart reports whether d may start now: a slot is free and its need
// fits the budget beside the admitted attempts' (running, starting and
// tearing down alike: an attempt holds its share until it finishes).
func (r *root) canStart(b budget, d *messages.Dispatch) bool {
	if len(r.running) >= r.slots() {
		return false
	}
	return b.fitsNow(r.held(), needOf(d))
}

// held is what the admitted attempts (running, starting and tearing down
// alike) hold against the host's budget.
func (r *root) held() need {
	var held need
	for _, att := range r.running {
		held = held.Plus(att.need)
	}
	return held
}

// refuseQueued ends every queued attempt with the preflight's code: the
// host cannot take them, and they have not started, so the server may
// dispatch them elsewhere. Running attempts are not touched.
func (r *root) refuseQueued(ctx actor.Context, report preflight.Report) {
	for _, p := range r.queue {
		notify(ctx, p.subscriber, r.failedOutcome(p.dispatch.AttemptID(), report.Code, "refused while queued: "+report.Reason, false))
	}
	r.queue = nil
	clear(r.inQueue)
}

func (r *root) finish(ctx actor.Context, attemptID string, degraded bool) {
	att, ok := r.running[attemptID]
	if !ok {
		return
	}
	delete(r.running, attemptID)
	delete(r.byPID, att.pid.GetId())
	r.live.remove(attemptID)
	r.uids.release(attemptID)
	if degraded {
		r.degraded[attemptID] = true
		r.degradedTotal++
		if r.reaper != nil {
			// What its teardown left is reaped as soon as the engine
			// answers again (see leftovers).
			ctx.Send(r.reaper, leftovers{})
		}
	}
	r.admit(ctx)
}

func (r *root) cancelAttempt(ctx actor.Context, msg messages.CancelAttempt) messages.CancelReply {
	if i := r.queued(msg.AttemptID); i >= 0 {
		p := r.queue[i]
		r.queue = append(r.queue[:i], r.queue[i+1:]...)
		delete(r.inQueue, msg.AttemptID)
		var out messages.AttemptOutcome
		if msg.Code != "" {
			out = r.failedOutcome(msg.AttemptID, msg.Code, msg.Reason+" (while queued)", false)
		} else {
			out = r.failedOutcome(msg.AttemptID, failure.SandboxCancelled, "cancelled while queued", false)
			out.Status = messages.StatusCancelled
		}
		notify(ctx, p.subscriber, out)
		return messages.CancelReply{AttemptID: msg.AttemptID, Found: true}
	}
	if att, ok := r.running[msg.AttemptID]; ok {
		ctx.Send(att.pid, msg)
		return messages.CancelReply{AttemptID: msg.AttemptID, Found: true}
	}
	return messages.CancelReply{AttemptID: msg.AttemptID}
}

// respawnReaper is the root's own timer message: the reaper that was
// stopped after too many restarts comes back.
type respawnReaper struct{}

func (r *root) spawnReaper(ctx actor.Context) {
	if r.cfg.Reaper == nil || r.stopped {
		return
	}
	r.reaper = ctx.SpawnPrefix(newReaperProps(*r.cfg.Reaper, r.live, r.cfg.Clock), "reaper")
	r.strategy.reaper = r.reaper
	if r.maintenance != nil {
		ctx.Send(r.reaper, *r.maintenance)
	}
}

// tellMaintenance sends the host report's maintenance verdict to the
// reaper and the collector when it changed (package doc: the reaper and
// the collector run only while the verdict allows).
func (r *root) tellMaintenance(ctx actor.Context) {
	report := r.capacity.report
	if report == nil {
		return
	}
	v := messages.MaintenanceVerdict{Allowed: report.MaintenanceAllowed(), Code: report.Code}
	if v.Allowed {
		v.Code = ""
	}
	if r.maintenance != nil && *r.maintenance == v {
		return
	}
	r.maintenance = &v
	for _, child := range []*actor.PID{r.reaper, r.gc} {
		if child != nil {
			ctx.Send(child, v)
		}
	}
}

// errNoCollector answers collector.CollectNow when no collector runs.
var errNoCollector = errors.New("image collection: the collector is off")

func (r *root) spawnCollector(ctx actor.Context) {
	if r.cfg.Collector == nil || r.stopped {
		return
	}
	r.gc = ctx.SpawnPrefix(r.cfg.Collector, collector.Kind)
	r.strategy.collector = r.gc
	if r.maintenance != nil {
		ctx.Send(r.gc, *r.maintenance)
	}
}

// onReaperGone spawns a fresh reaper an interval after the last one was
// stopped (it failed beyond its restart bounds): reaping never ends while
// the supervisor runs.
func (r *root) onReaperGone(ctx actor.Context) {
	r.reaper, r.strategy.reaper = nil, nil
	if r.stopped {
		return
	}
	ctx.Logger().Error("the reaper failed beyond its restart bounds; a new one starts after an interval")
	system, self := ctx.ActorSystem(), ctx.Self()
	r.reaperRespawn = r.cfg.Clock.AfterFunc(r.cfg.Reaper.interval(), func() { system.Root.Send(self, respawnReaper{}) })
}

// attemptGone is the supervisor's mailbox-ordered notice that an actor it
// knows terminated.
type attemptGone struct{ who *actor.PID }

func (r *root) onAttemptGone(ctx actor.Context, who *actor.PID) {
	id, ok := r.byPID[who.GetId()]
	if !ok {
		return
	}
	att := r.running[id]
	if att == nil || att.crashed {
		return
	}
	// The attempt stopped without reporting: it crashed. Release its
	// resources by label, as its own teardown would have, before the slot
	// is reused. The cleaner bounds its own engine calls and survives
	// cancellation.
	att.crashed = true
	owner := dockerops.OwnershipOf(att.dispatch)
	cleaner, ledgers := r.cfg.Cleaner, r.cfg.Ledgers
	actorkit.Go(ctx, context.WithoutCancel(r.runCtx), "crashed attempt cleanup", func(base context.Context) any {
		req := teardown.Request{Owner: owner, Source: ledger.SourceTeardown}
		entry, err := ledgers.Read(id)
		switch {
		case err == nil:
			req.Ledger = &entry
		case errors.Is(err, fs.ErrNotExist):
			err = nil // it crashed before planning anything
		}
		// A corrupt ledger is never trusted: it is left for the operator,
		// and the objects are still removed by label.
		return crashCleanupDone{attemptID: id, result: teardown.Release(base, cleaner, ledgers, req), ledgerErr: err}
	})
}

func (r *root) onCrashCleaned(ctx actor.Context, msg crashCleanupDone) {
	att, ok := r.running[msg.attemptID]
	if !ok {
		return
	}
	res := msg.result
	if msg.ledgerErr != nil {
		ctx.Logger().Warn("crashed attempt's ledger is unreadable; left for the operator", "attempt", msg.attemptID, "err", msg.ledgerErr)
	}
	degraded := res.Degraded()
	out := r.failedOutcome(msg.attemptID, failure.SandboxRuntimeFailed, "the attempt actor crashed; its resources were removed by label", degraded)
	if degraded {
		out.Message = fmt.Sprintf("the attempt actor crashed and its resources could not all be removed: %v", errors.Join(res.Err, res.LedgerErr))
	}
	out.Cleanup = &res.Report
	notify(ctx, att.subscriber, out)
	r.finish(ctx, msg.attemptID, degraded)
}

func (r *root) failedOutcome(id string, code failure.Code, message string, degraded bool) messages.AttemptOutcome {
	return messages.AttemptOutcome{AttemptID: id, Status: messages.StatusFailed, Code: string(code), Message: message,
		Degraded: degraded, FinishedAt: r.cfg.Clock.Now().UTC()}
}

func notify(ctx actor.Context, subscriber *actor.PID, out messages.AttemptOutcome) {
	if subscriber != nil {
		ctx.Send(subscriber, messages.AttemptFinished{Outcome: out})
	}
}

func (r *root) snapshot() messages.Snapshot {
	s := messages.Snapshot{Slots: r.slots(), Queued: len(r.queue), Degraded: len(r.degraded), DegradedTotal: r.degradedTotal, BuildQueue: r.permit.queueLength(), Attempts: []string{}}
	if rep := r.capacity.report; rep != nil {
		copied := *rep
		s.Preflight = &copied
	}
	if b := budgetOf(r.capacity.report); b.known {
		h := b.headroom(r.held())
		s.Headroom = &h
	}
	for id, att := range r.running {
		s.Attempts = append(s.Attempts, id)
		if messages.IsStartingPhase(att.phase) {
			s.Starting++
		} else {
			s.Active++
		}
	}
	return s
}

func (r *root) inspect(ctx actor.Context) messages.InspectReply {
	s := r.snapshot()
	facts := map[string]string{
		"slots": strconv.Itoa(s.Slots), "queued": strconv.Itoa(s.Queued), "starting": strconv.Itoa(s.Starting),
		"active": strconv.Itoa(s.Active), "degraded": strconv.Itoa(s.Degraded), "buildQueue": strconv.Itoa(s.BuildQueue),
	}
	facts["buildPermits"] = strconv.Itoa(r.permit.size)
	if holders := r.permit.holderIDs(); len(holders) > 0 {
		facts["buildPermitHolders"] = strings.Join(holders, ",")
	}
	held := r.held()
	facts["heldMemoryBytes"] = strconv.FormatInt(held.MemoryBytes, 10)
	facts["heldCpuMillis"] = strconv.FormatInt(held.CPUMillis, 10)
	if b := budgetOf(r.capacity.report); b.known {
		facts["budgetMemoryBytes"] = strconv.FormatInt(b.memoryBytes, 10)
		facts["budgetCpuMillis"] = strconv.FormatInt(b.cpuMillis, 10)
	}
	var children []string
	for _, pid := range ctx.Children() {
		children = append(children, pid.GetId())
	}
	phase := "running"
	if r.stopped {
		phase = "stopping"
	}
	return messages.InspectReply{PID: ctx.Self().GetId(), Kind: "supervisor", Phase: phase, Facts: facts, Children: children}
}
