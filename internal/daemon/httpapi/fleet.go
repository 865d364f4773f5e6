package httpapi

import (
	"context"
	"net/http"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// FleetReader is what a daemon's runner adds when the daemon is a member
// of a fleet (fleet.Routed): the directory as this member sees it.
type FleetReader interface {
	FleetDirectory(ctx context.Context) messages.FleetDirectory
	// InspectMember is the live actor tree of the member runnerID names,
	// read through the cluster; an error coded fleet_member_unknown when
	// no listed member has it.
	InspectMember(ctx context.Context, runnerID string) ([]messages.InspectReply, error)
}

// fleet serves the fleet's directory, read through this member (each
// listed member asked for its state); a daemon running alone answers that
// it is no member. Read-only, guarded as every GET.
func (a *api) fleet(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	reader, ok := a.runner.(FleetReader)
	if !ok {
		writeJSON(w, http.StatusOK, messages.FleetDirectory{Members: []messages.FleetMember{}})
		return
	}
	writeJSON(w, http.StatusOK, reader.FleetDirectory(r.Context()))
}

// inspectMember serves another member's live actor tree (`forged inspect
// --member`), read through this member; a daemon running alone knows no
// member (fleet_member_unknown).
func (a *api) inspectMember(w http.ResponseWriter, r *http.Request) {
	reader, ok := a.runner.(FleetReader)
	if !ok {
		writeRefusal(w, failure.FleetMemberUnknown, "this daemon is no fleet member: it runs alone (forged inspect without --member shows its tree)")
		return
	}
	tree, err := reader.InspectMember(r.Context(), r.PathValue("runnerId"))
	switch {
	case failure.Is(err, failure.FleetMemberUnknown):
		writeRefusal(w, failure.FleetMemberUnknown, err.Error())
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Code: string(failure.SandboxRuntimeFailed), Message: err.Error()})
	default:
		if tree == nil {
			tree = []messages.InspectReply{}
		}
		writeJSON(w, http.StatusOK, tree)
	}
}
