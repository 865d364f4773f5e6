package supervisor

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// permit is the build permit pool: at most size holders at once, and at
// most one holder per image key (two attempts of one project never build
// the same image side by side: the second waits, then finds the first's
// image in the cache). Waiters are served first come, first served, except
// that a waiter whose key is being built lets the waiters behind it pass.
// Holders and waiters are watched so that their termination releases the
// permit or their place in the queue.
type permit struct {
	size    int
	holders []holder
	waiters []holder
}

type holder struct {
	pid *actor.PID
	key string
}

func newPermit(size int) *permit {
	return &permit{size: max(size, 1)}
}

func (p *permit) acquire(ctx actor.Context, who *actor.PID, key string) {
	if who == nil {
		return
	}
	if indexOf(p.holders, who) >= 0 || indexOf(p.waiters, who) >= 0 {
		return
	}
	ctx.Watch(who)
	h := holder{pid: who, key: key}
	if p.grantable(h) {
		p.grant(ctx, h)
		return
	}
	p.waiters = append(p.waiters, h)
	ctx.Send(who, messages.BuildPermitQueued{Position: len(p.waiters)})
}

// grantable reports whether h may hold a permit now: one is free and no
// holder builds h's key.
func (p *permit) grantable(h holder) bool {
	if len(p.holders) >= p.size {
		return false
	}
	for _, held := range p.holders {
		if h.key != "" && held.key == h.key {
			return false
		}
	}
	return true
}

func (p *permit) release(ctx actor.Context, who *actor.PID) {
	i := indexOf(p.holders, who)
	if who == nil || i < 0 {
		return
	}
	ctx.Unwatch(who)
	p.holders = append(p.holders[:i], p.holders[i+1:]...)
	p.grantNext(ctx)
}

// forget handles a terminated actor: a holder loses its permit, a waiter
// its place.
func (p *permit) forget(ctx actor.Context, who *actor.PID) {
	if i := indexOf(p.holders, who); i >= 0 {
		p.holders = append(p.holders[:i], p.holders[i+1:]...)
		p.grantNext(ctx)
		return
	}
	if i := indexOf(p.waiters, who); i >= 0 {
		p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
	}
}

// grantNext grants free permits to the first waiters that may hold one.
func (p *permit) grantNext(ctx actor.Context) {
	for i := 0; i < len(p.waiters) && len(p.holders) < p.size; {
		if w := p.waiters[i]; p.grantable(w) {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.grant(ctx, w)
			continue
		}
		i++
	}
}

func (p *permit) grant(ctx actor.Context, h holder) {
	p.holders = append(p.holders, h)
	ctx.Send(h.pid, messages.BuildPermitGranted{})
}

func indexOf(list []holder, who *actor.PID) int {
	for i, h := range list {
		if h.pid.Equal(who) {
			return i
		}
	}
	return -1
}

func (p *permit) queueLength() int { return len(p.waiters) }

// holderIDs lists the holders' actor ids, in the order they were granted.
func (p *permit) holderIDs() []string {
	ids := make([]string, len(p.holders))
	for i, h := range p.holders {
		ids[i] = h.pid.String()
	}
	return ids
}
