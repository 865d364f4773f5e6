package supervisor

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// permit is the global build permit: one holder, FIFO waiters. Holders and
// waiters are watched so that their termination releases the permit or
// their place in the queue.
type permit struct {
	holder  *actor.PID
	waiters []*actor.PID
}

func (p *permit) acquire(ctx actor.Context, who *actor.PID) {
	if who == nil {
		return
	}
	if who.Equal(p.holder) || p.waiting(who) >= 0 {
		return
	}
	ctx.Watch(who)
	if p.holder == nil {
		p.grant(ctx, who)
		return
	}
	p.waiters = append(p.waiters, who)
	ctx.Send(who, messages.BuildPermitQueued{Position: len(p.waiters)})
}

func (p *permit) release(ctx actor.Context, who *actor.PID) {
	if who == nil || !who.Equal(p.holder) {
		return
	}
	ctx.Unwatch(who)
	p.holder = nil
	p.grantNext(ctx)
}

// forget handles a terminated actor: a holder loses the permit, a waiter
// its place.
func (p *permit) forget(ctx actor.Context, who *actor.PID) {
	if who.Equal(p.holder) {
		p.holder = nil
		p.grantNext(ctx)
		return
	}
	if i := p.waiting(who); i >= 0 {
		p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
	}
}

func (p *permit) grantNext(ctx actor.Context) {
	if len(p.waiters) == 0 {
		return
	}
	next := p.waiters[0]
	p.waiters = p.waiters[1:]
	p.grant(ctx, next)
}

func (p *permit) grant(ctx actor.Context, who *actor.PID) {
	p.holder = who
	ctx.Send(who, messages.BuildPermitGranted{})
}

func (p *permit) waiting(who *actor.PID) int {
	for i, w := range p.waiters {
		if w.Equal(who) {
			return i
		}
	}
	return -1
}

func (p *permit) queueLength() int { return len(p.waiters) }
