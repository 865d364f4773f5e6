package actors

import (
	"context"
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/actorkit"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

const kindLeasePusher = "lease-pusher"

// pushLease asks the lease pusher to send update into the worker.
type pushLease struct {
	containerID string
	update      lease.Update
}

// leasePushFailed tells the attempt a push did not land.
type leasePushFailed struct{ err error }

// leasePushed is the pusher's own notice that its push ended.
type leasePushed struct{ err error }

// leasePusher pushes signed lease updates into the running worker, one
// push at a time: an update that arrives during a push waits, and only the
// newest waiting one is sent, so an older update never overwrites a newer
// one in the worker. A failed push is reported to the attempt.
type leasePusher struct {
	docker  LeaseDocker
	runCtx  context.Context
	cancel  context.CancelFunc
	pushing bool
	next    *pushLease // the newest update waiting for the push in flight
	pushed  int
}

func newLeasePusherProps(docker LeaseDocker) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &leasePusher{docker: docker} })
}

func (p *leasePusher) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.runCtx, p.cancel = context.WithCancel(context.Background())
	case *actor.Stopping:
		p.cancel()
	case pushLease:
		if p.pushing {
			p.next = &msg
			return
		}
		p.push(ctx, msg)
	case leasePushed:
		p.pushing = false
		p.pushed++
		if msg.err != nil {
			ctx.Send(ctx.Parent(), leasePushFailed(msg))
		}
		if next := p.next; next != nil {
			p.next = nil
			p.push(ctx, *next)
		}
	case actorkit.Panic:
		p.pushing = false
		ctx.Send(ctx.Parent(), leasePushFailed{err: msg})
	case messages.Inspect:
		phase := "idle"
		if p.pushing {
			phase = "pushing"
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindLeasePusher, Phase: phase})
	}
}

func (p *leasePusher) push(ctx actor.Context, msg pushLease) {
	raw, err := json.Marshal(msg.update)
	if err != nil {
		ctx.Send(ctx.Parent(), leasePushFailed{err: err})
		return
	}
	p.pushing = true
	docker := p.docker
	// dockerops bounds the exec; the push ends with the pusher.
	actorkit.Go(ctx, p.runCtx, "lease push", func(runCtx context.Context) any {
		return leasePushed{err: docker.WriteLeaseUpdate(runCtx, msg.containerID, raw)}
	})
}
