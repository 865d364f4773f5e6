package actorkit

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
)

// recordingSupervisor records the directives a policy carries out.
type recordingSupervisor struct{ restarted, stopped int }

func (s *recordingSupervisor) Children() []*actor.PID            { return nil }
func (s *recordingSupervisor) EscalateFailure(any, any)          {}
func (s *recordingSupervisor) RestartChildren(...*actor.PID)     { s.restarted++ }
func (s *recordingSupervisor) StopChildren(...*actor.PID)        { s.stopped++ }
func (s *recordingSupervisor) ResumeChildren(pids ...*actor.PID) {}

func TestRestartPolicyRestartsWithinItsBoundThenStops(t *testing.T) {
	system := actor.NewActorSystem()
	var directives []actor.Directive
	sub := system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			directives = append(directives, e.Directive)
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	child := actor.NewPID("local", "child")

	sup, rs := &recordingSupervisor{}, actor.NewRestartStatistics()
	policy := RestartPolicy{Restart: true, MaxRestarts: 2, Period: time.Minute}
	for range 3 {
		policy.Apply(system, sup, child, rs, "boom")
	}
	assert.Equal(t, 2, sup.restarted, "restarted up to MaxRestarts times")
	assert.Equal(t, 1, sup.stopped, "stopped beyond them")
	assert.Equal(t, 0, rs.FailureCount(), "the statistics start afresh after the stop")
	policy.Apply(system, sup, child, rs, "boom")
	assert.Equal(t, 3, sup.restarted, "a later failure is restarted again")

	never := &recordingSupervisor{}
	RestartPolicy{}.Apply(system, never, child, actor.NewRestartStatistics(), "boom")
	assert.Equal(t, 0, never.restarted)
	assert.Equal(t, 1, never.stopped)

	assert.Equal(t, []actor.Directive{
		actor.RestartDirective, actor.RestartDirective, actor.StopDirective, actor.RestartDirective, actor.StopDirective,
	}, directives, "every decision is published")
}
