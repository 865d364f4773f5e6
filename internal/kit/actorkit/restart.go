package actorkit

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// RestartPolicy is how a supervisor strategy treats a failed child: with
// Restart, the child is restarted at most MaxRestarts times within Period
// and stopped beyond that (its statistics then start afresh); without, it
// is stopped at once (a parent learns of it through Terminated).
type RestartPolicy struct {
	Restart     bool
	MaxRestarts int
	Period      time.Duration
}

// Apply decides the directive for child's failure under p, publishes it
// on the event stream (as Proto.Actor's own strategies do, so that a
// harness sees every failure) and carries it out. forged's strategies
// call it from their HandleFailure once they know the child's policy.
func (p RestartPolicy) Apply(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any) {
	directive := actor.StopDirective
	if p.Restart {
		rs.Fail()
		if rs.NumberOfFailures(p.Period) <= p.MaxRestarts {
			directive = actor.RestartDirective
		} else {
			rs.Reset()
		}
	}
	system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
	if directive == actor.RestartDirective {
		sup.RestartChildren(child)
		return
	}
	sup.StopChildren(child)
}
