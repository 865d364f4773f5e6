package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/messages"
)

const kindBuild = "build"

// CancelBuild asks the build actor to give up.
type CancelBuild struct{}

// BuildEvent carries an event of the build to the attempt: cache miss,
// waiting for the permit, build started and completed. Build output never
// travels line by line: events carry the stored log's digest and a bounded,
// redacted tail.
type BuildEvent struct {
	Event messages.Event
}

// relookupResult is the cache lookup made once the permit is held: the
// previous holder may have built the key.
type relookupResult struct {
	imageID string
	found   bool
	// attestations name the image policy's record of a hit.
	attestations *messages.ImageAttestations
}

type lookupResult struct {
	imageID string
	found   bool
	foreign bool // the key's tag is on an image that is not forged's agent image of the key
	// stale says why an enforced image policy refused the hit (no valid
	// record); attestations name the record of a hit.
	stale        string
	attestations *messages.ImageAttestations
	err          error
}

type buildResult struct {
	imageID  string
	cacheHit bool
	// attestations name the image policy's record (of the hit, or of the
	// image built); policy is the record the build's evaluation made.
	attestations *messages.ImageAttestations
	policy       *imagepolicy.Record
	err          error
	log          buildlog.Record
	logTail      string
	duration     time.Duration
	// abandoned: the actor's wait for a flight ended with its run context;
	// the flight itself runs on (see CancelBuild).
	abandoned bool
}

// buildActor resolves the attempt's sandbox image. A cache hit needs no
// permit. A miss waits for the global build permit (FIFO, owned by the root
// supervisor), looks the cache up again (the previous permit holder may have
// built the same key: that is how attempts needing the same key share one
// build) and builds. The permit is released on completion, and by the root
// supervisor if this actor terminates while holding it.
//
// The build itself runs as a buildFlight, which can outlive the attempt:
// an attempt that gives up while its build runs hands the permit and the
// flight to another attempt waiting for the same key, and cancels the
// build only when none waits.
type buildActor struct {
	job        sandboxImageJob
	builder    *imageBuilder
	supervisor *actor.PID
	refs       *imagegc.Refs // nil: no image collection to guard against
	// parent is the attempt's run context: the build's own derives from
	// it, so that the attempt's end (it cancels it before it releases its
	// image key) also ends a lookup still waiting to acquire the key.
	parent context.Context

	runCtx context.Context
	cancel context.CancelFunc
	phase  string
	permit bool
	// flight is the running build this actor owns (nil when none): the one
	// it started or the one handed over to it with the permit.
	flight *buildFlight
	// cancelled: CancelBuild arrived. idle: in a build given up, no lookup
	// or wait of this actor runs any more (see giveUp).
	cancelled, idle bool
	// queuedAt is when the build was told to wait for a permit (zero when
	// it got one at once): a cache hit after that wait is the seed's
	// single-flight wait, on another attempt's build of the same key.
	queuedAt time.Time
}

func newBuildProps(parent context.Context, builder *imageBuilder, job sandboxImageJob, supervisor *actor.PID, refs *imagegc.Refs) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &buildActor{parent: parent, builder: builder, job: job, supervisor: supervisor, refs: refs}
	})
}

func (b *buildActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		b.runCtx, b.cancel = context.WithCancel(b.parent)
		b.phase = "cache_lookup"
		b.lookup(ctx)
	case lookupResult:
		switch {
		case msg.err != nil && b.runCtx.Err() != nil && !b.cancelled:
			// The attempt cancelled the run context and its CancelBuild
			// is on the way: finishing now would leave that message to a
			// gone actor. giveUp ends the build once it arrives.
			b.settle(ctx)
		case msg.err != nil && failure.CodeOf(msg.err) != "":
			b.finish(ctx, messages.BuildFailed{Err: msg.err})
		case msg.err != nil:
			b.finish(ctx, messages.BuildFailed{Err: failure.Wrap(failure.SandboxBuildFailed, msg.err, "look up cached sandbox image")})
		case msg.found:
			b.finish(ctx, messages.BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: true, Attestations: msg.attestations})
		default:
			b.phase = "waiting_permit"
			data := map[string]any{"cacheKey": b.job.key}
			content := fmt.Sprintf("Sandbox image %s requires a build.", shortKey(b.job.key))
			switch {
			case msg.foreign:
				data["foreignImage"] = true
				content = fmt.Sprintf("Sandbox image %s requires a build: its tag is on an image forged did not build for that key, which the build replaces.", shortKey(b.job.key))
			case msg.stale != "":
				data["policyRecord"] = msg.stale
				content = fmt.Sprintf("Sandbox image %s requires a build: the enforced image policy has no valid record of the cached image (%s).", shortKey(b.job.key), msg.stale)
			}
			b.event(ctx, "sandbox_image_cache_miss", content, data)
			ctx.Request(b.supervisor, messages.AcquireBuildPermit{AttemptID: b.job.attemptID, Key: b.job.key})
		}
	case messages.BuildPermitQueued:
		if b.phase == "waiting_permit" {
			if b.queuedAt.IsZero() {
				b.queuedAt = time.Now()
			}
			b.event(ctx, "sandbox_build_waiting", fmt.Sprintf("Waiting for the build permit, position %d in the queue.", msg.Position),
				map[string]any{"cacheKey": b.job.key, "queuePosition": msg.Position})
		}
	case messages.BuildPermitGranted:
		b.onGranted(ctx, msg)
	case relookupResult:
		if b.phase == "giving_up" || (b.phase == "building" && b.runCtx.Err() != nil) {
			b.settle(ctx)
			return
		}
		if b.phase != "building" {
			return
		}
		if msg.found {
			b.onBuilt(ctx, buildResult{imageID: msg.imageID, cacheHit: true, attestations: msg.attestations})
			return
		}
		b.flight = startFlight(b.parent, flightBuild(b.builder, b.job))
		b.event(ctx, "sandbox_build_started", fmt.Sprintf("Building sandbox image %s.", shortKey(b.job.key)),
			map[string]any{"cacheKey": b.job.key})
		b.await(ctx)
	case buildResult:
		switch {
		case msg.abandoned && (b.phase == "building" || b.phase == "giving_up"):
			b.settle(ctx) // the run context ended: given up
		case b.phase == "giving_up":
			b.flight = nil // it ended just now: waiters find its image
			b.settle(ctx)
		case b.phase == "building":
			b.flight = nil // ended
			b.onBuilt(ctx, msg)
		}
	case messages.BuildPermitHandedOver:
		b.onHandedOver(ctx, msg)
	case asyncPanic:
		b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxBuildFailed, "%s", msg.Error())})
	case CancelBuild:
		b.cancel()
		b.cancelled = true
		switch b.phase {
		case "building":
			// The lookup or the wait for the flight ends with runCtx; its
			// report settles the build (relookupResult, buildResult).
			b.phase = "giving_up"
		case "giving_up":
			b.giveUp(ctx)
		case "waiting_permit", "cache_lookup":
			b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxCancelled, "build cancelled")})
		}
	case *actor.Stopping:
		if b.cancel != nil {
			b.cancel()
		}
		if b.flight != nil && (b.phase == "building" || b.phase == "giving_up") {
			b.flight.Cancel() // owned, and handed to no one
		}
	case messages.Inspect:
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindBuild, Phase: b.phase, Facts: map[string]string{
			"key": b.job.key, "holdsPermit": boolString(b.permit),
		}})
	}
}

// onBuilt reports the build's end. A build that ran (not a second cache
// hit) reports its duration and its stored log: digest, size and tail.
func (b *buildActor) onBuilt(ctx actor.Context, msg buildResult) {
	if msg.cacheHit && msg.err == nil && !b.queuedAt.IsZero() {
		waited := time.Since(b.queuedAt)
		b.event(ctx, "sandbox_build_singleflight_wait", fmt.Sprintf("Waited %s for the build of sandbox image %s.", waited.Round(time.Millisecond), shortKey(b.job.key)),
			map[string]any{"cacheKey": b.job.key, "durationMs": waited.Milliseconds(), "imageDigest": msg.imageID})
	}
	if !msg.cacheHit && msg.log.Digest != "" {
		data := map[string]any{
			"cacheKey": b.job.key, "durationMs": msg.duration.Milliseconds(),
			"buildLog": map[string]any{"digest": msg.log.Digest, "bytes": msg.log.Bytes, "truncated": msg.log.Truncated, "tail": msg.logTail},
		}
		if msg.policy != nil {
			eventType, content, policyData := policyEventData(msg.policy)
			b.event(ctx, eventType, content, policyData)
		}
		if msg.err != nil {
			b.event(ctx, "sandbox_build_log_preserved", fmt.Sprintf("The failed build's restricted log has digest %s.", msg.log.Digest), data)
		} else {
			data["imageDigest"] = msg.imageID
			b.event(ctx, "sandbox_build_completed", fmt.Sprintf("Built sandbox image %s in %s.", msg.imageID, msg.duration.Round(time.Millisecond)), data)
		}
	}
	if msg.err != nil {
		b.finish(ctx, messages.BuildFailed{Err: msg.err})
		return
	}
	b.finish(ctx, messages.BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: msg.cacheHit, Attestations: msg.attestations})
}

func (b *buildActor) event(ctx actor.Context, eventType, content string, data any) {
	ctx.Send(ctx.Parent(), BuildEvent{Event: messages.RunnerEvent(eventType, content, data)})
}

func shortKey(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

// finish reports to the attempt, gives the permit back and stops. Stopping
// also makes the supervisor drop this actor from the permit queue.
func (b *buildActor) finish(ctx actor.Context, report any) {
	if b.phase == "done" {
		return
	}
	b.phase = "done"
	if b.permit {
		ctx.Request(b.supervisor, messages.ReleaseBuildPermit{})
		b.permit = false
	}
	ctx.Send(ctx.Parent(), report)
	ctx.Stop(ctx.Self())
}

func (b *buildActor) lookup(ctx actor.Context) {
	builder, job, refs := b.builder, b.job, b.refs // dockerops bounds the inspects
	runAsync(ctx, b.runCtx, "image cache lookup", func(runCtx context.Context) any {
		if err := builder.checkPolicy(runCtx, job); err != nil {
			return lookupResult{err: err}
		}
		if refs != nil {
			// Held until the attempt stops; waits while a collection is
			// removing this key's images, which the lookup then misses.
			// Once the build or its attempt ended, it takes nothing.
			if err := refs.Acquire(runCtx, job.attemptID, job.key); err != nil {
				return lookupResult{err: failure.Wrap(failure.SandboxCancelled, err, "image cache lookup")}
			}
		}
		id, found, foreign, err := builder.lookup(runCtx, job.key)
		res := lookupResult{imageID: id, found: found, foreign: foreign, err: err}
		if found && err == nil {
			res.attestations, res.stale = builder.policyHit(runCtx, job.key, id)
			res.found = res.stale == ""
		}
		return res
	})
}

// onGranted takes the permit: with a handed-over flight it waits for that
// build, otherwise it looks the cache up again and builds on a miss. A
// build given up meanwhile gives the permit (and the flight) on at once.
func (b *buildActor) onGranted(ctx actor.Context, msg messages.BuildPermitGranted) {
	flight, _ := msg.Build.(*buildFlight)
	b.permit = true
	b.flight = flight
	if b.runCtx.Err() != nil {
		b.phase = "giving_up"
		b.idle = true
		b.giveUp(ctx)
		return
	}
	b.phase = "building"
	if flight == nil {
		b.relookup(ctx)
		return
	}
	b.event(ctx, "sandbox_build_started", fmt.Sprintf("Taking over the running build of sandbox image %s from an attempt that gave up.", shortKey(b.job.key)),
		map[string]any{"cacheKey": b.job.key, "handedOver": true})
	b.await(ctx)
}

// relookup looks the cache up again now that the permit is held.
func (b *buildActor) relookup(ctx actor.Context) {
	builder, key := b.builder, b.job.key // dockerops bounds the inspect
	runAsync(ctx, b.runCtx, "image cache lookup", func(runCtx context.Context) any {
		id, found, _, err := builder.lookup(runCtx, key)
		res := relookupResult{imageID: id, found: err == nil && found}
		if res.found {
			// An enforced image policy takes a hit only with a valid
			// record; a stale image is removed and rebuilt.
			var stale string
			res.attestations, stale = builder.policyHit(runCtx, key, id)
			if stale != "" {
				builder.removeStale(runCtx, key)
				res.found = false
			}
		}
		return res
	})
}

// await waits, off the mailbox, for the owned flight's result.
func (b *buildActor) await(ctx actor.Context) {
	flight := b.flight
	runAsync(ctx, b.runCtx, "image build", func(runCtx context.Context) any { return flight.wait(runCtx) })
}

// settle notes that no lookup or wait of this actor runs any more in a
// build given up, and gives it up once CancelBuild arrived too.
func (b *buildActor) settle(ctx actor.Context) {
	b.phase = "giving_up"
	b.idle = true
	b.giveUp(ctx)
}

// giveUp ends a build given up, once both CancelBuild has arrived and
// nothing of the actor runs (the attempt cancels the run context before it
// sends CancelBuild: finishing earlier would leave that message to a gone
// actor). An owned flight is handed over; otherwise the permit is released.
func (b *buildActor) giveUp(ctx actor.Context) {
	if !b.cancelled || !b.idle {
		return
	}
	if b.flight != nil {
		b.handOver(ctx)
		return
	}
	b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxCancelled, "build cancelled")})
}

// handOver offers the permit and the running flight to an attempt waiting
// for the same key; the answer (onHandedOver) ends this build.
func (b *buildActor) handOver(ctx actor.Context) {
	b.phase = "handing_over"
	ctx.Request(b.supervisor, messages.HandOverBuildPermit{Build: b.flight})
}

// onHandedOver ends a build given up: its flight goes on for the attempt
// that took the permit, or is cancelled when none waited.
func (b *buildActor) onHandedOver(ctx actor.Context, msg messages.BuildPermitHandedOver) {
	if b.phase != "handing_over" {
		return
	}
	b.permit = false // the supervisor passed or released it
	reason := "build cancelled"
	if msg.HandedOver {
		reason = "build cancelled; the running build was handed to another attempt waiting for the same image"
	} else {
		b.flight.Cancel()
	}
	b.flight = nil
	b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxCancelled, "%s", reason)})
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
