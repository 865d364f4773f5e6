package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// TestStateOfCarriesServicesAndToolchains: a member's entry lists the
// catalogue services whose image its engine holds (ready ones only: a
// missing or mismatched image cannot start) and its toolchain images,
// from its preflight; the API's view carries both, and a member that did
// not answer lists neither.
func TestStateOfCarriesServicesAndToolchains(t *testing.T) {
	snap := messages.Snapshot{Slots: 1, Preflight: &messages.HostReport{
		Services: []messages.ServiceImage{
			{Service: "postgres", Ref: "forged-services/postgres:1", ImageID: "sha256:p", State: "ready"},
			{Service: "redis", Ref: "forged-services/redis:1", ImageID: "sha256:r", State: "missing"},
		},
		Toolchains: []messages.ToolchainImage{{Name: "go", Ref: "forged-images/go:1", ImageID: "sha256:g"}},
	}}
	st := fleet.StateOf("r1", snap, nil, false)
	require.Len(t, st.GetServices(), 1)
	assert.Equal(t, "postgres", st.GetServices()[0].GetName())
	assert.Equal(t, "sha256:p", st.GetServices()[0].GetImageId())
	require.Len(t, st.GetToolchains(), 1)
	assert.Equal(t, "forged-images/go:1", st.GetToolchains()[0].GetRef())

	view := fleet.DirectoryView("f", "r1", []*fleetpb.MemberState{st, {Address: "x", Error: "timeout"}})
	assert.Equal(t, []messages.FleetImage{{Name: "postgres", Ref: "forged-services/postgres:1", ImageID: "sha256:p"}}, view.Members[0].Services)
	assert.Equal(t, []messages.FleetImage{{Name: "go", Ref: "forged-images/go:1", ImageID: "sha256:g"}}, view.Members[0].Toolchains)
	assert.Empty(t, view.Members[1].Services)
	assert.Empty(t, view.Members[1].Toolchains)
}
