package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

const kindBuild = "build"

// BuildDone tells the attempt its sandbox image is ready.
type BuildDone struct {
	ImageID  string
	Key      string
	CacheHit bool
}

// BuildFailed tells the attempt its image could not be built.
type BuildFailed struct {
	Err error
}

// CancelBuild asks the build actor to give up.
type CancelBuild struct{}

// BuildLog carries one line of build output to the attempt.
type BuildLog struct {
	Line string
}

type lookupResult struct {
	imageID string
	found   bool
	err     error
}

type buildResult struct {
	imageID  string
	cacheHit bool
	err      error
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

	runCtx context.Context
	cancel context.CancelFunc
	phase  string
	permit bool
}

func newBuildProps(builder *imageBuilder, job sandboxImageJob, supervisor *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &buildActor{builder: builder, job: job, supervisor: supervisor}
	})
}

func (b *buildActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		b.runCtx, b.cancel = context.WithCancel(context.Background())
		b.phase = "cache_lookup"
		b.lookup(ctx)
	case lookupResult:
		switch {
		case msg.err != nil:
			b.finish(ctx, BuildFailed{Err: failure.Wrap(failure.SandboxBuildFailed, msg.err, "look up cached sandbox image")})
		case msg.found:
			b.finish(ctx, BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: true})
		default:
			b.phase = "waiting_permit"
			ctx.Request(b.supervisor, messages.AcquireBuildPermit{AttemptID: b.job.attemptID, Key: b.job.key})
		}
	case messages.BuildPermitGranted:
		if b.runCtx.Err() != nil {
			ctx.Request(b.supervisor, messages.ReleaseBuildPermit{})
			return
		}
		b.permit = true
		b.phase = "building"
		b.build(ctx)
	case BuildLog:
		ctx.Send(ctx.Parent(), msg)
	case buildResult:
		if msg.err != nil {
			b.finish(ctx, BuildFailed{Err: msg.err})
			return
		}
		b.finish(ctx, BuildDone{ImageID: msg.imageID, Key: b.job.key, CacheHit: msg.cacheHit})
	case asyncPanic:
		b.finish(ctx, BuildFailed{Err: failure.New(failure.SandboxBuildFailed, "%s", msg.Error())})
	case CancelBuild:
		b.cancel()
		if b.phase == "waiting_permit" || b.phase == "cache_lookup" {
			b.finish(ctx, BuildFailed{Err: failure.New(failure.SandboxCancelled, "build cancelled")})
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
	builder, key := b.builder, b.job.key // dockerops bounds the inspect
	runAsync(ctx, b.runCtx, "image cache lookup", func(runCtx context.Context) any {
		id, found, err := builder.lookup(runCtx, key)
		return lookupResult{imageID: id, found: found, err: err}
	})
}

func (b *buildActor) build(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	builder, job := b.builder, b.job // dockerops bounds the inspect and the build
	runAsync(ctx, b.runCtx, "image build", func(runCtx context.Context) any {
		id, found, err := builder.lookup(runCtx, job.key)
		if err == nil && found {
			return buildResult{imageID: id, cacheHit: true}
		}
		id, err = builder.build(runCtx, job, func(line string) { system.Root.Send(self, BuildLog{Line: line}) })
		return buildResult{imageID: id, err: err}
	})
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
