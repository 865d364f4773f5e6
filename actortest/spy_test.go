package actortest_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/messages"
)

// permitUser asks target for the build permit and gives it back once
// granted: the exchange a build actor has with the root supervisor.
type permitUser struct{ target *actor.PID }

func (p *permitUser) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(p.target, messages.AcquireBuildPermit{AttemptID: "a", Key: "k"})
	case messages.BuildPermitGranted:
		ctx.Request(p.target, messages.ReleaseBuildPermit{})
	}
}

func TestSpyShouldSendReadsLikeTheProtocol(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	supervisor := actortest.NewProbe(t, system)
	user, spy := actortest.SpawnSpied(t, system, func() actor.Actor { return &permitUser{target: supervisor.PID()} })

	spy.ShouldSend(t).To(supervisor.PID()).Within(time.Second).Message(messages.AcquireBuildPermit{AttemptID: "a", Key: "k"})
	system.Root.Send(user, messages.BuildPermitGranted{})
	spy.ShouldSend(t).To(supervisor.PID()).Message(messages.ReleaseBuildPermit{})
	actortest.Expect[messages.ReleaseBuildPermit](t, supervisor, time.Second)
}
