package actortest

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// PermitGranted is what a PermitUser reports to its probe when the build
// permit is granted to it: the user's name and the image key it asked
// under (the same for PermitUser).
type PermitGranted struct{ User, Key string }

// ReleasePermit tells a PermitUser to give the permit back.
type ReleasePermit struct{}

// Crash makes a test actor panic with Reason (declare it with
// System.AllowFailures).
type Crash struct{ Reason string }

// PermitUser is a test actor speaking the build-permit protocol with
// supervisor, as a build actor does: it asks for the permit (under key)
// when started, reports the grant to granted, releases the permit on
// ReleasePermit and panics on Crash.
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
			granted.record(PermitGranted{User: user, Key: key})
		case ReleasePermit:
			ctx.Request(supervisor, messages.ReleaseBuildPermit{})
		case Crash:
			panic(msg.Reason)
		}
	})
}
