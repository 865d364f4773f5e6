package actortest

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// PermitGranted is what a PermitUser reports to its probe when the build
// permit is granted to it.
type PermitGranted struct{ Key string }

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
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(supervisor, messages.AcquireBuildPermit{AttemptID: key, Key: key})
		case messages.BuildPermitGranted:
			granted.record(PermitGranted{Key: key})
		case ReleasePermit:
			ctx.Request(supervisor, messages.ReleaseBuildPermit{})
		case Crash:
			panic(msg.Reason)
		}
	})
}
