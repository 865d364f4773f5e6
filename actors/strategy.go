package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/actorkit"
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

// ChildSpecFor is the attempt's supervision spec for a child kind. Unknown
// kinds are stopped, never restarted.
func ChildSpecFor(kind string) ChildSpec {
	switch kind {
	case kindWatchdog, kindSampler:
		return ChildSpec{Restart: true, MaxRestarts: 3, Period: time.Minute}
	case kindService:
		// A restarted database has lost the task's data.
		return ChildSpec{}
	case kindEgress:
		// A restarted proxy would create a second container under the
		// same name while the task runs; its death fails the attempt.
		return ChildSpec{}
	default: // worker, build, lease pusher: a sandbox run, a build or a push is not idempotent
		return ChildSpec{}
	}
}

// childSupervisor is one attempt's supervisor strategy. The attempt
// spawns its children through it, so it knows each child's kind from the
// spawn rather than from the child's name. Its map is touched only from
// the attempt's mailbox: in Receive (spawn, forget) and in HandleFailure,
// which Proto.Actor calls while the parent processes the failure.
type childSupervisor struct {
	kinds map[string]string // child PID id → kind
}

func newChildSupervisor() *childSupervisor {
	return &childSupervisor{kinds: map[string]string{}}
}

// spawn starts a child of kind and records it.
func (s *childSupervisor) spawn(ctx actor.Context, props *actor.Props, kind string) *actor.PID {
	pid := ctx.SpawnPrefix(props, kind)
	s.kinds[pid.GetId()] = kind
	return pid
}

// forget drops a terminated child.
func (s *childSupervisor) forget(pid *actor.PID) { delete(s.kinds, pid.GetId()) }

func (s *childSupervisor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, _ any) {
	actorkit.RestartPolicy(ChildSpecFor(s.kinds[child.GetId()])).Apply(system, sup, child, rs, reason)
}
