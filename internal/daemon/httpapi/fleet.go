package httpapi

import (
	"context"
	"net/http"

	"github.com/forgedev/forged/messages"
)

// FleetReader is what a daemon's runner adds when the daemon is a member
// of a fleet (fleet.Routed): the directory as this member sees it.
type FleetReader interface {
	FleetDirectory(ctx context.Context) messages.FleetDirectory
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
