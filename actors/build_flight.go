package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/forgedev/forged/failure"
)

// buildFlight is one running image build, apart from the build actor that
// started it, so that it can outlive that actor's attempt: when the
// attempt gives up, the permit holder hands the flight, with the permit,
// to another attempt waiting for the same key (messages.HandOverBuildPermit),
// which waits for it instead of building again. Exactly one build actor owns
// a flight at a time (the permit's holder), and only the owner cancels it:
// when no one waits for its key any more, or when it stops holding it.
//
// The flight's goroutine is owned by the flight: it ends when the build
// returns (dockerops bounds every build) or when the flight is cancelled.
type buildFlight struct {
	cancel context.CancelFunc
	done   chan struct{}
	result buildResult // written once, before done is closed
}

// Cancel stops the flight's build (messages.RunningBuild); it is safe to
// call more than once and after the build ended.
func (f *buildFlight) Cancel() { f.cancel() }

// startFlight runs build on its own goroutine, on a context that keeps
// parent's values but not its cancellation (the flight may outlive it).
func startFlight(parent context.Context, build func(context.Context) buildResult) *buildFlight {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	f := &buildFlight{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				f.result = buildResult{err: failure.New(failure.SandboxBuildFailed, "image build panicked: %v", r)}
			}
		}()
		f.result = build(ctx)
	}()
	return f
}

// wait returns the flight's result, or ctx's error once ctx is done (the
// flight runs on).
func (f *buildFlight) wait(ctx context.Context) buildResult {
	select {
	case <-f.done:
		return f.result
	case <-ctx.Done():
		return buildResult{err: fmt.Errorf("wait for the image build: %w", ctx.Err()), abandoned: true}
	}
}

// flightBuild is the build a flight runs: the project and agent images of
// job, its log stored, its duration measured and, under an image policy,
// its attestations made.
func flightBuild(builder *imageBuilder, job sandboxImageJob) func(context.Context) buildResult {
	return func(ctx context.Context) buildResult {
		start := time.Now()
		built, tail, err := builder.buildLogged(ctx, job)
		res := buildResult{imageID: built.id, err: err, log: built.log, logTail: tail, duration: time.Since(start)}
		if err == nil {
			// The image policy's evaluation (SBOM, gate, provenance) is
			// part of the build: a waiter handed the flight gets its record.
			res.policy, res.err = builder.attest(ctx, job, built, start)
			if res.policy != nil {
				res.attestations = attestations(*res.policy)
			}
		}
		return res
	}
}
