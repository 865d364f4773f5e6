// Package actorkit holds the small helpers forged's actors share to keep
// their mailboxes free: work that blocks (Docker, git, files) runs on a
// goroutine owned by the actor, and its result comes back as a message.
package actorkit

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// Panic is delivered instead of a result when async work panics.
type Panic struct {
	Step  string
	Value any
	Stack string
}

// Error describes the panic.
func (p Panic) Error() string { return fmt.Sprintf("%s panicked: %v", p.Step, p.Value) }

// Go runs work on a goroutine and sends what it returns to the actor's own
// mailbox, so the actor never blocks on I/O. The goroutine is owned by the
// actor: work must honour runCtx (which the actor cancels when it stops)
// and give every call inside it a deadline, so the goroutine always ends. A
// panic in work is recovered and delivered as Panic. When the system
// tracks its work (TrackWork), the goroutine is counted until it returns.
func Go(ctx actor.Context, runCtx context.Context, step string, work func(context.Context) any) {
	system := ctx.ActorSystem()
	self := ctx.Self()
	tracked := workOf(system)
	if tracked != nil {
		tracked.enter(step) // before the goroutine starts: Idle never misses it
	}
	go func() {
		if tracked != nil {
			defer tracked.exit(step)
		}
		var msg any
		func() {
			defer func() {
				if r := recover(); r != nil {
					msg = Panic{Step: step, Value: r, Stack: string(debug.Stack())}
				}
			}()
			msg = work(runCtx)
		}()
		system.Root.Send(self, msg)
	}()
}
