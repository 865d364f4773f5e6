package fleet

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// ChooseFor is placement's choice for a dispatch's repository; Serves is
// the predicate it filters members by (repos.go).
var (
	ChooseFor = choose
	Serves    = serves
)

// Choose is choose for a dispatch whose repository every member serves.
func Choose(dir []*fleetpb.MemberState, fleetName string) (*fleetpb.MemberState, *failure.Error) {
	return choose(dir, fleetName, messages.RepoRef{})
}
