package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// repoRoots is the operator's allowlist of repository roots
// (Config.RepoRoots, --repo-root): the directories, symlinks resolved,
// under which a dispatch's repo.localPath must lie. Empty allows any path
// forged can read (the daemon warns at start).
type repoRoots []string

// resolveRepoRoots checks the operator's roots: each an absolute path of
// an existing directory. They are kept with their symlinks resolved.
func resolveRepoRoots(paths []string) (repoRoots, error) {
	roots := make(repoRoots, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("runner: repo root %q is not an absolute path (--repo-root)", p)
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("runner: repo root %q (--repo-root): %w", p, err)
		}
		info, err := os.Stat(resolved)
		if err != nil {
			return nil, fmt.Errorf("runner: repo root %q (--repo-root): %w", p, err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("runner: repo root %q is not a directory (--repo-root)", p)
		}
		roots = append(roots, resolved)
	}
	return roots, nil
}

// outsideRoots is the one refusal for a path outside every root and for
// one that cannot be resolved: the caller learns nothing of the host's
// files, not even whether the path exists.
const outsideRoots = "repo.localPath is not inside a repository root this runner allows: ask the operator to add its root with --repo-root"

// admit reports whether the dispatch's repository lies under a root, its
// symlinks resolved (always, when there are no roots); refused is the
// refusal when it does not.
func (roots repoRoots) admit(d *messages.Dispatch) (refused messages.SubmitReply, ok bool) {
	return roots.admitPath(d, d.Repo.LocalPath)
}

// admitPath is admit for the repository at path.
func (roots repoRoots) admitPath(d *messages.Dispatch, path string) (refused messages.SubmitReply, ok bool) {
	if len(roots) == 0 {
		return messages.SubmitReply{}, true
	}
	refused = messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.RepoOutsideRoots), Message: outsideRoots}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil || !filepath.IsAbs(resolved) {
		return refused, false
	}
	for _, root := range roots {
		if within(resolved, root) {
			return messages.SubmitReply{}, true
		}
	}
	return refused, false
}

// within reports whether the clean absolute path lies at or under root.
func within(path, root string) bool {
	if root == string(filepath.Separator) || path == root {
		return true
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}
