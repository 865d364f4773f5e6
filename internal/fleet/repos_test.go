package fleet_test

import (
	"testing"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/messages"
)

// TestServesMatchesTheMembersAdmission: a member serves a repo.localPath
// under its roots (any, without roots), a repo.remote over a protocol it
// fetches, and a file:// remote only under its roots as well.
func TestServesMatchesTheMembersAdmission(t *testing.T) {
	local := &fleetpb.MemberState{RepoRoots: []string{"/srv/repos"}}
	anyPath := &fleetpb.MemberState{}
	fetcher := &fleetpb.MemberState{RepoRoots: []string{"/srv/repos"}, RemoteProtocols: []string{"https", "file"}}
	for _, c := range []struct {
		name string
		st   *fleetpb.MemberState
		repo messages.RepoRef
		want bool
	}{
		{"path under the root", local, messages.RepoRef{LocalPath: "/srv/repos/app"}, true},
		{"the root itself", local, messages.RepoRef{LocalPath: "/srv/repos"}, true},
		{"sibling sharing the prefix", local, messages.RepoRef{LocalPath: "/srv/repos-evil/app"}, false},
		{"dot-dot escape", local, messages.RepoRef{LocalPath: "/srv/repos/../etc"}, false},
		{"no roots", anyPath, messages.RepoRef{LocalPath: "/anywhere"}, true},
		{"remote without fetching", local, messages.RepoRef{Remote: "https://github.com/acme/app.git"}, false},
		{"remote without fetching, no roots", anyPath, messages.RepoRef{Remote: "https://github.com/acme/app.git"}, false},
		{"https remote", fetcher, messages.RepoRef{Remote: "https://github.com/acme/app.git"}, true},
		{"ssh not allowed", fetcher, messages.RepoRef{Remote: "ssh://git@github.com/acme/app.git"}, false},
		{"file remote under the root", fetcher, messages.RepoRef{Remote: "file:///srv/repos/app"}, true},
		{"file remote outside", fetcher, messages.RepoRef{Remote: "file:///etc/app"}, false},
		{"malformed remote", fetcher, messages.RepoRef{Remote: "ext::sh"}, false},
		{"nothing named", local, messages.RepoRef{}, true},
	} {
		if got := fleet.Serves(c.st, c.repo); got != c.want {
			t.Errorf("%s: serves = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestChoosePlacesRemotesOnMembersThatServeThem: only members that fetch
// the remote's protocol are chosen, whatever their free slots; among
// members with as many free slots, the one holding the mirror wins over a
// lower runner id; with none serving, capacity_exhausted.
func TestChoosePlacesRemotesOnMembersThatServeThem(t *testing.T) {
	const remote = "https://GitHub.com/acme/app.git/"
	u, err := remoteurl.Parse(remote)
	if err != nil {
		t.Fatal(err)
	}
	repo := messages.RepoRef{Remote: remote}
	dir := []*fleetpb.MemberState{
		{RunnerId: "a-local-only", FreeSlots: 9, PreflightAvailable: true},
		{RunnerId: "b-fetches", FreeSlots: 3, PreflightAvailable: true, RemoteProtocols: []string{"https"}},
		{RunnerId: "c-has-mirror", FreeSlots: 3, PreflightAvailable: true, RemoteProtocols: []string{"https"}, Mirrors: []string{u.Key()}},
	}
	st, refused := fleet.ChooseFor(dir, "f", repo)
	if refused != nil || st.GetRunnerId() != "c-has-mirror" {
		t.Fatalf("chose %v, %v; want c-has-mirror (ties broken by the mirror)", st, refused)
	}
	dir[1].FreeSlots = 4
	if st, _ := fleet.ChooseFor(dir, "f", repo); st.GetRunnerId() != "b-fetches" {
		t.Fatalf("chose %v; want b-fetches (free slots first, the mirror only breaks ties)", st.GetRunnerId())
	}
	if st, _ := fleet.ChooseFor(dir, "f", messages.RepoRef{LocalPath: "/srv/app"}); st.GetRunnerId() != "a-local-only" {
		t.Fatalf("a local path chose %v; want a-local-only (most free, no roots)", st.GetRunnerId())
	}
	_, refused = fleet.ChooseFor(dir, "f", messages.RepoRef{Remote: "ssh://git@github.com/acme/app.git"})
	if refused == nil || refused.Code != failure.CapacityExhausted {
		t.Fatalf("no member fetching ssh = %v; want %s", refused, failure.CapacityExhausted)
	}
}

// TestStateOfCarriesRepositories: the member's entry says what it serves.
func TestStateOfCarriesRepositories(t *testing.T) {
	snap := messages.Snapshot{Slots: 1, Repositories: &messages.Repositories{
		Roots: []string{"/srv"}, RemoteProtocols: []string{"https"}, Mirrors: []string{"0123456789abcdef0123456789abcdef"}}}
	st := fleet.StateOf("r1", snap, nil, false)
	if len(st.GetRepoRoots()) != 1 || st.GetRepoRoots()[0] != "/srv" || len(st.GetRemoteProtocols()) != 1 || len(st.GetMirrors()) != 1 {
		t.Fatalf("repositories not carried: %v", st)
	}
	view := fleet.DirectoryView("f", "r1", []*fleetpb.MemberState{st, {Address: "x", Error: "timeout"}})
	if r := view.Members[0].Repositories; r == nil || r.Roots[0] != "/srv" || r.RemoteProtocols[0] != "https" || len(r.Mirrors) != 1 {
		t.Fatalf("the API's view lost the repositories: %+v", view.Members[0])
	}
	if view.Members[1].Repositories != nil {
		t.Fatalf("a member that did not answer lists repositories: %+v", view.Members[1])
	}
}
