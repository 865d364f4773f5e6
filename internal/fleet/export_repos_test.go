package fleet

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// Serves is the predicate placement filters members by (repos.go).
var Serves = serves

// ChooseFor is placement's choice for a dispatch of repo that reserves
// nothing.
func ChooseFor(dir []*fleetpb.MemberState, fleetName string, repo messages.RepoRef) (*fleetpb.MemberState, *failure.Error) {
	return choose(dir, fleetName, &messages.Dispatch{Repo: repo})
}
