package runner

import (
	"fmt"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/kit/remoteurl"
	"github.com/forgedev/forged/messages"
)

// admitRepo is the admission of the dispatch's repository. A
// repo.localPath must lie under the repository roots (repoRoots.admit). A
// repo.remote needs remote fetching on (--remote-protocols) over its
// URL's protocol, else dispatch_remote_refused; a file:// remote is a
// path on this host, so it must lie under the roots too, exactly as a
// repo.localPath (dispatch_repo_outside_roots).
func admitRepo(d *messages.Dispatch, roots repoRoots, policy gitops.RemotePolicy) (refused messages.SubmitReply, ok bool) {
	if d.Repo.Remote == "" {
		return roots.admit(d)
	}
	refuse := func(format string, args ...any) (messages.SubmitReply, bool) {
		return messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.RemoteRefused), Message: fmt.Sprintf(format, args...)}, false
	}
	u, err := remoteurl.Parse(d.Repo.Remote)
	switch {
	case err != nil: // Validate refused it already; kept for dispatches built in code
		return messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.DispatchInvalid), Message: "field repo.remote: " + err.Error()}, false
	case !policy.Enabled():
		return refuse("this runner fetches no remotes (its operator has not set --remote-protocols); name a repo.localPath under its --repo-root, or send the dispatch to a member that fetches")
	case !policy.Allows(u):
		return refuse("this runner does not fetch %s remotes (it allows %s: --remote-protocols)", u.Scheme, strings.Join(policy.Protocols, ", "))
	case u.Scheme == remoteurl.File:
		return roots.admitPath(d, u.Path)
	}
	return messages.SubmitReply{}, true
}

// repositories is what repositories the runner serves, for its snapshot
// (and the fleet's directory): its roots, its remote protocols and the
// mirrors in its state root. A mirrors directory that cannot be read
// lists no mirror (the fleet then only loses a placement preference).
func (r *Runner) repositories() *messages.Repositories {
	mirrors, err := gitops.ListMirrors(r.stateRoot)
	if err != nil {
		r.logger.Warn("cannot list the remote mirrors", "error", err)
	}
	return &messages.Repositories{
		Roots:           append([]string(nil), r.repoRoots...),
		RemoteProtocols: append([]string(nil), r.remotes.Protocols...),
		Mirrors:         mirrors,
	}
}
