package actors

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ChildSpec says what happens when a child of a given kind fails.
type ChildSpec struct {
	// Restart, when true, restarts the failing child, at most MaxRestarts
	// times within Period; beyond that (or when false) the child is stopped
	// and its parent learns of it through Terminated.
	Restart     bool
	MaxRestarts int
	Period      time.Duration
}

// ChildSpecs is the attempt's supervision spec, by child kind (the prefix
// of the child's name before '/').
var ChildSpecs = map[string]ChildSpec{
	kindWorker:   {Restart: false},
	kindBuild:    {Restart: false},
	kindWatchdog: {Restart: true, MaxRestarts: 3, Period: time.Minute},
	kindSampler:  {Restart: true, MaxRestarts: 3, Period: time.Minute},
}

// specStrategy applies ChildSpecs. Unknown kinds are stopped, never
// restarted.
type specStrategy struct {
	specs map[string]ChildSpec
}

// NewSpecStrategy returns a supervisor strategy applying specs by child kind.
func NewSpecStrategy(specs map[string]ChildSpec) actor.SupervisorStrategy {
	return &specStrategy{specs: specs}
}

func (s *specStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, _ any) {
	spec, ok := s.specs[childKind(child)]
	directive := actor.StopDirective
	if ok && spec.Restart {
		rs.Fail()
		if rs.NumberOfFailures(spec.Period) <= spec.MaxRestarts {
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

// childKind extracts the kind from a child PID id such as
// "$1/attempt-x/worker" or "$1/attempt-x/worker$3".
func childKind(pid *actor.PID) string {
	id := pid.GetId()
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if i := strings.IndexByte(id, '$'); i >= 0 {
		id = id[:i]
	}
	return id
}
