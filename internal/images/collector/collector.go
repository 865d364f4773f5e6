// Package collector is the image garbage collection actor: it runs an
// imagegc collection on a timer, at once when the preflight disk turns
// low, and on request, one at a time and off its mailbox, guarding every
// removal with the attempts' reference count.
package collector

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/messages"
)

// Kind is the actor's kind in inspection replies.
const Kind = "image-gc"

// Config configures the collector.
type Config struct {
	API    imagegc.EngineAPI
	Refs   *imagegc.Refs // the attempts' image keys; nil: none
	Policy imagegc.Policy
	// StateRoot, when set, has the stored build logs collected too
	// (imagegc.PurgeAudit).
	StateRoot string
	// Interval is the time between scheduled collections; 0 schedules
	// none (the collector then runs when the disk turns low, and on
	// request).
	Interval time.Duration
	// DiskLow says whether the preflight disk is low now (default: never);
	// it is asked every DiskCheck (default 1 min), off the mailbox, and a
	// change to low starts a collection.
	DiskLow   func(ctx context.Context) (bool, error)
	DiskCheck time.Duration
	Clock     clock.Clock // default the wall clock
	// OnCollection, when set, is told every collection's report (a dry
	// run's too, with Report.DryRun set), from the collector's Receive.
	OnCollection func(reason string, report imagegc.Report, err error)
}

func (c Config) withDefaults() Config {
	if c.Interval < 0 {
		c.Interval = 0
	}
	if c.DiskCheck <= 0 {
		c.DiskCheck = time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	return c
}

// CollectNow asks for a collection; answered with CollectReply once it
// ends.
type CollectNow struct {
	DryRun bool
}

// CollectReply is a collection's report.
type CollectReply struct {
	Report imagegc.Report
	Err    error
}

// ErrBusy answers CollectNow while another collection runs.
var ErrBusy = errors.New("image collection: another collection is running")

type tick struct{}

type diskChecked struct {
	low bool
	err error
}

type collected struct {
	report  imagegc.Report
	err     error
	reason  string
	replyTo *actor.PID
}

// collectTimeout bounds one collection.
const collectTimeout = 30 * time.Minute

// Props returns the collector's props.
func Props(cfg Config) *actor.Props {
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor {
		return &collectorActor{cfg: cfg, maintenance: messages.MaintenanceVerdict{Allowed: true}}
	})
}

type collectorActor struct {
	cfg     Config
	runCtx  context.Context
	cancel  context.CancelFunc
	timer   clock.Timer
	next    time.Time // the next scheduled collection
	busy    bool
	diskLow bool
	// maintenance is the host's verdict (allowed until told otherwise).
	maintenance messages.MaintenanceVerdict

	runs       int
	lastReason string
	lastAt     time.Time
	lastErr    string
	lastFreed  int64
	lastCount  int
}

func (c *collectorActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.runCtx, c.cancel = context.WithCancel(context.Background())
		if c.cfg.Interval > 0 {
			c.next = c.cfg.Clock.Now().Add(c.cfg.Interval)
		}
		c.arm(ctx)
	case *actor.Stopping:
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.cancel != nil {
			c.cancel()
		}
	case messages.MaintenanceVerdict:
		c.maintenance = msg
	case tick:
		c.arm(ctx)
		if !c.maintenance.Allowed {
			return // neither scheduled nor disk-pressure collections
		}
		if c.cfg.Interval > 0 && !c.cfg.Clock.Now().Before(c.next) {
			c.next = c.cfg.Clock.Now().Add(c.cfg.Interval)
			c.collect(ctx, "timer", false, nil)
			return
		}
		if c.cfg.DiskLow != nil {
			diskLow := c.cfg.DiskLow
			actorkit.Go(ctx, c.runCtx, "disk check", func(runCtx context.Context) any {
				low, err := diskLow(runCtx)
				return diskChecked{low: low, err: err}
			})
		}
	case diskChecked:
		if msg.err != nil {
			ctx.Logger().Warn("image collection: disk check failed", "err", msg.err)
			return
		}
		turnedLow := msg.low && !c.diskLow
		c.diskLow = msg.low
		if turnedLow {
			c.collect(ctx, "disk_low", false, nil)
		}
	case CollectNow:
		if err := c.maintenance.Err(); err != nil {
			ctx.Respond(CollectReply{Err: err})
			return
		}
		if c.busy {
			ctx.Respond(CollectReply{Err: ErrBusy})
			return
		}
		c.collect(ctx, "request", msg.DryRun, ctx.Sender())
	case collected:
		c.busy = false
		c.runs++
		c.lastReason, c.lastAt, c.lastErr = msg.reason, c.cfg.Clock.Now(), ""
		if msg.err != nil {
			c.lastErr = msg.err.Error()
			ctx.Logger().Warn("image collection failed", "reason", msg.reason, "err", msg.err)
		}
		c.lastFreed, c.lastCount = msg.report.FreedBytes, len(msg.report.Removed)+len(msg.report.Dangling)
		if c.cfg.OnCollection != nil {
			c.cfg.OnCollection(msg.reason, msg.report, msg.err)
		}
		if msg.replyTo != nil {
			ctx.Send(msg.replyTo, CollectReply{Report: msg.report, Err: msg.err})
		}
	case actorkit.Panic:
		c.busy = false
		ctx.Logger().Error("image collection panicked", "step", msg.Step, "panic", msg.Error())
	case messages.Inspect:
		phase := "idle"
		if c.busy {
			phase = "collecting"
		}
		facts := map[string]string{
			"runs": strconv.Itoa(c.runs), "nextScheduled": "never (only when the disk turns low, or on request)",
			"diskLow": strconv.FormatBool(c.diskLow),
		}
		if c.cfg.Interval > 0 {
			facts["nextScheduled"] = c.next.UTC().Format(time.RFC3339)
		}
		if !c.maintenance.Allowed {
			phase, facts["maintenance"] = "refused", "refused: "+string(c.maintenance.Code)
		}
		if c.runs > 0 {
			facts["lastReason"], facts["lastAt"] = c.lastReason, c.lastAt.UTC().Format(time.RFC3339)
			facts["lastRemoved"], facts["lastFreedBytes"] = strconv.Itoa(c.lastCount), strconv.FormatInt(c.lastFreed, 10)
			if c.lastErr != "" {
				facts["lastError"] = c.lastErr
			}
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: Kind, Phase: phase, Facts: facts})
	}
}

// arm schedules the next tick: the timer only sends a message.
func (c *collectorActor) arm(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	c.timer = c.cfg.Clock.AfterFunc(c.cfg.DiskCheck, func() { system.Root.Send(self, tick{}) })
}

func (c *collectorActor) collect(ctx actor.Context, reason string, dryRun bool, replyTo *actor.PID) {
	if c.busy {
		return
	}
	c.busy = true
	cfg, now := c.cfg, c.cfg.Clock.Now()
	actorkit.Go(ctx, c.runCtx, "image collection", func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, collectTimeout)
		defer cancel()
		report, err := imagegc.Collect(callCtx, cfg.API, imagegc.Request{Policy: cfg.Policy, Now: now, DryRun: dryRun, Refs: cfg.Refs, StateRoot: cfg.StateRoot})
		return collected{report: report, err: err, reason: reason, replyTo: replyTo}
	})
}
