package fleet

import (
	"path"
	"strings"

	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/messages"
)

// serves reports whether a member, by its directory entry, can serve the
// dispatch's repository, so that placement sends the dispatch only where
// the member's own admission would take it:
//   - repo.remote: the member fetches over the URL's protocol
//     (remote_protocols), and a file:// remote lies under one of its
//     repo_roots (or it has none);
//   - repo.localPath: the path lies under one of its repo_roots, or it has
//     none (any path).
//
// The roots check is lexical: symlinks are the member's to resolve, and
// its admission still refuses a path that only looks inside. A RepoRef
// naming neither (a dispatch built in code) is served by every member.
func serves(st *fleetpb.MemberState, repo messages.RepoRef) bool {
	if repo.Remote == "" {
		return repo.LocalPath == "" || underRoots(repo.LocalPath, st.GetRepoRoots())
	}
	u, err := remoteurl.Parse(repo.Remote)
	if err != nil {
		return false
	}
	fetches := false
	for _, p := range st.GetRemoteProtocols() {
		fetches = fetches || p == u.Scheme
	}
	if u.Scheme == remoteurl.File {
		return fetches && underRoots(u.Path, st.GetRepoRoots())
	}
	return fetches
}

// holdsMirror reports whether the member already holds the mirror of the
// dispatch's repo.remote: placement prefers it among members with as many
// free slots, since its fetch is incremental.
func holdsMirror(st *fleetpb.MemberState, repo messages.RepoRef) bool {
	if repo.Remote == "" {
		return false
	}
	u, err := remoteurl.Parse(repo.Remote)
	if err != nil {
		return false
	}
	key := u.Key()
	for _, m := range st.GetMirrors() {
		if m == key {
			return true
		}
	}
	return false
}

// underRoots reports whether the absolute path p lies at or under one of
// roots, lexically; no roots admit any path.
func underRoots(p string, roots []string) bool {
	if len(roots) == 0 {
		return true
	}
	if !path.IsAbs(p) {
		return false
	}
	p = path.Clean(p)
	for _, root := range roots {
		root = path.Clean(root)
		if root == "/" || p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}
