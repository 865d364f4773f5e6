package fleet

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// Choose and StateOf are placement's choice and a runner's directory
// entry, for the in-process tests (no cluster).
var (
	ChooseFor = choose
	StateOf   = stateOf
	Serves    = serves
)

// Choose is choose for a dispatch whose repository every member serves.
func Choose(dir []*fleetpb.MemberState, fleetName string) (*fleetpb.MemberState, *failure.Error) {
	return choose(dir, fleetName, messages.RepoRef{})
}

// DirectoryView is the API's form of a directory read.
var DirectoryView = directoryView
