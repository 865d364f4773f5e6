package fleet

import (
	"context"
	"time"

	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// directoryTimeout bounds a directory read made through the daemon's API
// (GET /v1/fleet): each member is asked within the request timeout, in
// parallel.
const directoryTimeout = 2 * DefaultRequestTimeout

// FleetDirectory is the fleet as this member sees it, for the daemon's
// API (GET /v1/fleet) and its console.
func (r Routed) FleetDirectory(ctx context.Context) messages.FleetDirectory {
	ctx, cancel := context.WithTimeout(ctx, directoryTimeout)
	defer cancel()
	return directoryView(r.Member.cfg.Name, r.Runner.RunnerID(), r.Member.Directory(ctx))
}

// directoryView is the API's form of a directory read.
func directoryView(name, self string, states []*fleetpb.MemberState) messages.FleetDirectory {
	out := messages.FleetDirectory{Member: true, Fleet: name, RunnerID: self, Members: make([]messages.FleetMember, 0, len(states))}
	for _, st := range states {
		out.Members = append(out.Members, memberView(st))
	}
	return out
}

// memberView is one member's entry in the API's form.
func memberView(st *fleetpb.MemberState) messages.FleetMember {
	v := messages.FleetMember{
		RunnerID: st.GetRunnerId(), Address: st.GetAddress(), MemberID: st.GetMemberId(),
		Slots: int(st.GetSlots()), FreeSlots: int(st.GetFreeSlots()), Active: int(st.GetActive()),
		Starting: int(st.GetStarting()), Queued: int(st.GetQueued()),
		Attempts: append([]string{}, st.GetAttempts()...),
		Draining: st.GetDraining(), CutOff: st.GetCutOff(),
		PreflightAvailable: st.GetPreflightAvailable(), PreflightCode: st.GetPreflightCode(), PreflightReason: st.GetPreflightReason(),
		MemoryAvailableBytes: st.GetMemoryAvailableBytes(), CPUAvailableMillis: int(st.GetCpuAvailableMillis()),
		DiskFreeBytes: st.GetDiskFreeBytes(), DiskLow: st.GetDiskLow(), Error: st.GetError(),
	}
	if h, ok := headroomOf(st); ok {
		v.Headroom = &h
	}
	v.RunnerInstanceID = st.GetRunnerInstanceId()
	if st.GetError() == "" {
		v.Repositories = &messages.Repositories{Roots: st.GetRepoRoots(), RemoteProtocols: st.GetRemoteProtocols(), Mirrors: st.GetMirrors()}
		v.Services, v.Toolchains = fleetImages(st.GetServices()), fleetImages(st.GetToolchains())
	}
	if ms := st.GetUpdatedUnixMillis(); ms > 0 {
		at := time.UnixMilli(ms).UTC()
		v.UpdatedAt = &at
	}
	return v
}

// fleetImages is the API's form of a member's images.
func fleetImages(refs []*fleetpb.ImageRef) []messages.FleetImage {
	if len(refs) == 0 {
		return nil
	}
	out := make([]messages.FleetImage, 0, len(refs))
	for _, r := range refs {
		out = append(out, messages.FleetImage{Name: r.GetName(), Ref: r.GetRef(), ImageID: r.GetImageId()})
	}
	return out
}
