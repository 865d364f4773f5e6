package actors

import (
	"context"
	"github.com/forgedev/forged/internal/clock"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

const kindSampler = "memory-sampler"

// sampleTimeout bounds one stats call.
const sampleTimeout = 5 * time.Second

// PeakMemoryRequest asks the memory sampler for its record. Replied with
// PeakMemory.
type PeakMemoryRequest struct{}

// PeakMemory is the sampler's record: the highest usage seen, over how many
// samples, and how many samples failed.
type PeakMemory struct {
	PeakBytes     uint64
	Samples       int
	FailedSamples int
}

type sampleTick struct{}

type sampleResult struct {
	bytes uint64
	err   error
}

// memorySampler samples the worker container's memory usage on a timer
// (its own timer, re-armed after each sample completes, so samples never
// overlap) and keeps the peak.
type memorySampler struct {
	docker      SamplerDocker
	clk         clock.Clock
	interval    time.Duration
	containerID string

	runCtx context.Context
	cancel context.CancelFunc
	timer  clock.Timer
	record PeakMemory
}

func newMemorySamplerProps(docker SamplerDocker, clk clock.Clock, interval time.Duration, containerID string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &memorySampler{docker: docker, clk: clk, interval: interval, containerID: containerID}
	})
}

func (s *memorySampler) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.runCtx, s.cancel = context.WithCancel(context.Background())
		s.sample(ctx)
	case sampleTick:
		s.timer = nil
		s.sample(ctx)
	case sampleResult:
		if msg.err != nil {
			s.record.FailedSamples++
		} else {
			s.record.Samples++
			s.record.PeakBytes = max(s.record.PeakBytes, msg.bytes)
		}
		if s.timer != nil {
			return // a result from before a restart: one timer chain only
		}
		system, self := ctx.ActorSystem(), ctx.Self()
		s.timer = s.clk.AfterFunc(s.interval, func() { system.Root.Send(self, sampleTick{}) })
	case asyncPanic:
		s.record.FailedSamples++
	case PeakMemoryRequest:
		ctx.Respond(s.record)
	case *actor.Restarting, *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.cancel != nil {
			s.cancel()
		}
	case messages.Inspect:
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindSampler, Phase: "sampling", Facts: map[string]string{
			"container": s.containerID,
			"peakBytes": strconv.FormatUint(s.record.PeakBytes, 10),
			"samples":   strconv.Itoa(s.record.Samples),
			"failed":    strconv.Itoa(s.record.FailedSamples),
		}})
	}
}

func (s *memorySampler) sample(ctx actor.Context) {
	runAsync(ctx, s.runCtx, "memory sample", func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, sampleTimeout)
		defer cancel()
		bytes, err := s.docker.MemoryUsage(callCtx, s.containerID)
		return sampleResult{bytes: bytes, err: err}
	})
}
