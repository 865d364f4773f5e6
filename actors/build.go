package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/images/imagegc"
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

// buildStarted is the build goroutine telling its actor that it holds the
// permit, missed the cache again and is building.
type buildStarted struct{}

type lookupResult struct {
	imageID string
	found   bool
	foreign bool // the key's tag is on an image that is not forged's agent image of the key
	err     error
}

type buildResult struct {
	imageID  string
	cacheHit bool
	err      error
	log      buildlog.Record
	logTail  string
	duration time.Duration
}

// buildActor resolves the attempt's sandbox image. A cache hit needs no
// permit. A miss waits for the global build permit (FIFO, owned by the root
// supervisor), looks the cache up again (the previous permit holder may have
// built the same key: that is how attempts needing the same key share one
// build) and builds. The permit is released on completion, and by the root
// supervisor if this actor terminates while holding it.
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
		case msg.err != nil && failure.CodeOf(msg.err) != "":
			b.finish(ctx, messages.BuildFailed{Err: msg.err})
		case msg.err != nil:
			b.finish(ctx, messages.BuildFailed{Err: failure.Wrap(failure.SandboxBuildFailed, msg.err, "look up cached sandbox image")})
		case msg.found:
			b.finish(ctx, messages.BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: true})
		default:
			b.phase = "waiting_permit"
			data := map[string]any{"cacheKey": b.job.key}
			content := fmt.Sprintf("Sandbox image %s requires a build.", shortKey(b.job.key))
			if msg.foreign {
				data["foreignImage"] = true
				content = fmt.Sprintf("Sandbox image %s requires a build: its tag is on an image forged did not build for that key, which the build replaces.", shortKey(b.job.key))
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
		if b.runCtx.Err() != nil {
			ctx.Request(b.supervisor, messages.ReleaseBuildPermit{})
			return
		}
		b.permit = true
		b.phase = "building"
		b.build(ctx)
	case buildStarted:
		b.event(ctx, "sandbox_build_started", fmt.Sprintf("Building sandbox image %s.", shortKey(b.job.key)),
			map[string]any{"cacheKey": b.job.key})
	case buildResult:
		b.onBuilt(ctx, msg)
	case asyncPanic:
		b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxBuildFailed, "%s", msg.Error())})
	case CancelBuild:
		b.cancel()
		if b.phase == "waiting_permit" || b.phase == "cache_lookup" {
			b.finish(ctx, messages.BuildFailed{Err: failure.New(failure.SandboxCancelled, "build cancelled")})
		}
	case *actor.Stopping:
		if b.cancel != nil {
			b.cancel()
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
	b.finish(ctx, messages.BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: msg.cacheHit})
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
		return lookupResult{imageID: id, found: found, foreign: foreign, err: err}
	})
}

func (b *buildActor) build(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	builder, job := b.builder, b.job // dockerops bounds the inspect and the build
	runAsync(ctx, b.runCtx, "image build", func(runCtx context.Context) any {
		id, found, _, err := builder.lookup(runCtx, job.key)
		if err == nil && found {
			return buildResult{imageID: id, cacheHit: true}
		}
		system.Root.Send(self, buildStarted{})
		start := time.Now()
		built, tail, err := builder.buildLogged(runCtx, job)
		return buildResult{imageID: built.id, err: err, log: built.log, logTail: tail, duration: time.Since(start)}
	})
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
