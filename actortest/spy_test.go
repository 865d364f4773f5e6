package actortest_test

import (
	"testing"
	"time"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/messages"
)

func TestSpyShouldSendReadsLikeTheProtocol(t *testing.T) {
	sys := actortest.NewSystem(t)
	supervisor := sys.NewProbe()
	grants := sys.NewProbe()
	props := actortest.PermitUser(supervisor.PID(), "k", grants)
	spy := actortest.SpyOn(props)
	user := sys.Spawn(props)

	spy.ShouldSend(t).To(supervisor.PID()).Within(time.Second).Message(messages.AcquireBuildPermit{AttemptID: "k", Key: "k"})
	sys.Root.Send(user, messages.BuildPermitGranted{})
	actortest.Expect[actortest.PermitGranted](t, grants, time.Second)
	sys.Root.Send(user, actortest.ReleasePermit{})
	spy.ShouldSend(t).To(supervisor.PID()).Message(messages.ReleaseBuildPermit{})
	actortest.Expect[messages.ReleaseBuildPermit](t, supervisor, time.Second)
}
