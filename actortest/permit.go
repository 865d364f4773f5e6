package actortest

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// PermitGranted is what a PermitUser reports to its probe when the build
// permit is granted to it: the user's name and the image key it asked
// under (the same for PermitUser), and the running build handed over with
// the permit (nil when none was).
type PermitGranted struct {
	User, Key string
	Build     messages.RunningBuild
}

// ReleasePermit tells a PermitUser to give the permit back.
type ReleasePermit struct{}

// HandOverPermit tells a PermitUser to hand its permit over with Build
// (messages.HandOverBuildPermit); it reports the answer as PermitHandedOver.
type HandOverPermit struct{ Build messages.RunningBuild }

// PermitHandedOver is what a PermitUser reports to its probe when the
// supervisor answered its hand-over.
type PermitHandedOver struct {
	User       string
	HandedOver bool
}

// Crash makes a test actor panic with Reason (declare it with
// System.AllowFailures).
type Crash struct{ Reason string }

// PermitUser is a test actor speaking the build-permit protocol with
// supervisor, as a build actor does: it asks for the permit (under key)
// when started, reports the grant to granted, releases the permit on
// ReleasePermit, hands it over on HandOverPermit and panics on Crash.
func PermitUser(supervisor *actor.PID, key string, granted *Probe) *actor.Props {
	return PermitUserOf(supervisor, key, key, granted)
}

// PermitUserOf is a PermitUser named user that asks for the permit to
// build the image key: two users of one key never hold permits at once.
func PermitUserOf(supervisor *actor.PID, user, key string, granted *Probe) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(supervisor, messages.AcquireBuildPermit{AttemptID: user, Key: key})
		case messages.BuildPermitGranted:
			granted.record(PermitGranted{User: user, Key: key, Build: msg.Build})
		case ReleasePermit:
			ctx.Request(supervisor, messages.ReleaseBuildPermit{})
		case HandOverPermit:
			ctx.Request(supervisor, messages.HandOverBuildPermit{Build: msg.Build})
		case messages.BuildPermitHandedOver:
			granted.record(PermitHandedOver{User: user, HandedOver: msg.HandedOver})
		case Crash:
			panic(msg.Reason)
		}
	})
}
