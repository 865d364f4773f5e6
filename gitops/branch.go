package gitops

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
)

const resetTimeout = 2 * time.Minute

// worktree is one record of `git worktree list --porcelain -z`.
type worktree struct {
	Path     string
	Head     string
	Branch   string // full ref name, "" when detached
	Bare     bool
	Detached bool
}

// parseWorktreeList parses `git worktree list --porcelain -z`: NUL-ended
// attribute lines, records separated by an empty line. Records without an
// absolute path are dropped.
func parseWorktreeList(out string) []worktree {
	var list []worktree
	var cur worktree
	flush := func() {
		if filepath.IsAbs(cur.Path) {
			list = append(list, cur)
		}
		cur = worktree{}
	}
	for _, line := range strings.Split(out, "\x00") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "":
			flush()
		case "worktree":
			if cur.Path != "" {
				flush()
			}
			cur.Path = value
		case "HEAD":
			cur.Head = value
		case "branch":
			cur.Branch = value
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		}
	}
	flush()
	return list
}

// moveManagedBranch moves refs/heads/<worktreeKey> from input to result
// with a compare-and-swap. When a worktree has the branch checked out, that
// worktree must be clean at input and able to take result without
// overwriting untracked files; it is reset to result after the move. When
// none has, the branch may be absent (it is created) or at input.
// Anything else is failure.SandboxOutputConflict and moves nothing.
func moveManagedBranch(ctx context.Context, git *Runner, repo, worktreeKey, input, result string) error {
	branch := "refs/heads/" + worktreeKey
	listing, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout}, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return err
	}
	for _, wt := range parseWorktreeList(listing) {
		if !wt.Bare && wt.Branch == branch {
			return moveCheckedOut(ctx, git, repo, wt.Path, branch, input, result)
		}
	}
	current, exists, err := refValue(ctx, git, repo, branch, failure.SandboxRuntimeFailed)
	if err != nil {
		return err
	}
	old := zeroOID(result)
	if exists {
		if current != input {
			return failure.New(failure.SandboxOutputConflict, "managed branch %s changed after the sandbox input was captured", worktreeKey)
		}
		old = input
	}
	return updateRef(ctx, git, repo, branch, result, old)
}

func moveCheckedOut(ctx context.Context, git *Runner, repo, dir, branch, input, result string) error {
	conflict := func(format string, args ...any) error {
		return failure.New(failure.SandboxOutputConflict, "managed worktree %s: "+format, append([]any{dir}, args...)...)
	}
	head, err := git.Run(ctx, dir, RunOpts{Timeout: shortTimeout, Code: failure.SandboxOutputConflict}, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return err
	}
	if strings.TrimSpace(head) != input {
		return conflict("HEAD moved after the sandbox input was captured")
	}
	status, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict},
		"status", "--porcelain=v1", "--untracked-files=no")
	if err != nil {
		return err
	}
	if strings.TrimSpace(status) != "" {
		return conflict("has uncommitted changes")
	}
	// A dry run of the two-tree fast-forward refuses when result would
	// overwrite untracked files, which reset --hard would silently clobber.
	if _, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict},
		"read-tree", "--dry-run", "-m", "-u", input, result); err != nil {
		if ExitCode(err) >= 0 {
			return conflict("cannot take the result without overwriting files%s", detail(err))
		}
		return err
	}
	if err := updateRef(ctx, git, repo, branch, result, input); err != nil {
		return err
	}
	if _, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict},
		"reset", "--hard", "--quiet"); err != nil {
		return failure.Wrap(failure.SandboxOutputConflict, err, "managed branch moved but worktree %s was not reset", dir)
	}
	return nil
}

// updateRef moves ref to newID only if it is at oldID (the zero id: only if
// it does not exist). A refused update is failure.SandboxOutputConflict.
func updateRef(ctx context.Context, git *Runner, repo, ref, newID, oldID string) error {
	_, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout},
		"update-ref", "-m", "forged: import sandbox result", ref, newID, oldID)
	if err != nil && ExitCode(err) >= 0 {
		return failure.Wrap(failure.SandboxOutputConflict, err, "managed branch changed after the sandbox input was captured%s", detail(err))
	}
	return err
}

// detail renders err as a " (...)" suffix for messages.
func detail(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
