package supervisor

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/actorkit"
)

// Restart bounds of the reaper: a panic restarts it at once, up to
// reaperMaxRestarts times within reaperRestartPeriod; beyond that it is
// stopped and the supervisor spawns a fresh one an interval later. One bad
// round never ends periodic reaping.
const (
	reaperMaxRestarts   = 5
	reaperRestartPeriod = time.Minute
)

// rootStrategy supervises the root's children. Attempts are never
// restarted (a sandbox run is not idempotent: a crashed attempt is torn
// down by label instead); the reaper and the image collector are restarted
// within the same bounds (a collector beyond them stays stopped: images
// pile up, nothing breaks). The root tells the
// strategy which child is the reaper when it spawns it, so no kind is
// parsed back out of a PID. Its field is touched only from the root's
// mailbox: in Receive and in HandleFailure, which Proto.Actor calls while
// the root processes the failure.
type rootStrategy struct {
	reaper    *actor.PID
	collector *actor.PID
}

func (s *rootStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, _ any) {
	policy := actorkit.RestartPolicy{} // attempts: stopped, never restarted
	if (s.reaper != nil && child.Equal(s.reaper)) || (s.collector != nil && child.Equal(s.collector)) {
		policy = actorkit.RestartPolicy{Restart: true, MaxRestarts: reaperMaxRestarts, Period: reaperRestartPeriod}
	}
	policy.Apply(system, sup, child, rs, reason)
}
