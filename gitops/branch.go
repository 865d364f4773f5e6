package gitops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
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

// worktreeLeft names a checked-out worktree left as it was, and why.
type worktreeLeft struct{ path, reason string }

// moveManagedBranch moves refs/heads/<worktreeKey> from input to result
// with a compare-and-swap. When a worktree has the branch checked out, the
// result tree is measured first (entries and bytes, see measureTree): beyond
// the budget the branch moves and the worktree is left untouched, which the
// returned worktreeLeft says. Within it, that worktree must be clean at
// input and able to take result without overwriting untracked files; it is
// reset to result after the move. When none has, the branch may be absent
// (it is created) or at input. Anything else is
// failure.SandboxOutputConflict and moves nothing.
func moveManagedBranch(ctx context.Context, git *Runner, repo, worktreeKey, input, result string, b Budget) (worktreeLeft, error) {
	branch := "refs/heads/" + worktreeKey
	listing, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout}, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return worktreeLeft{}, err
	}
	for _, wt := range parseWorktreeList(listing) {
		if wt.Bare || wt.Branch != branch {
			continue
		}
		over, err := measureTree(ctx, git, repo, result, b)
		if err != nil {
			return worktreeLeft{}, err
		}
		if over != "" {
			return worktreeLeft{path: wt.Path, reason: over}, updateRef(ctx, git, repo, branch, result, input)
		}
		return worktreeLeft{}, moveCheckedOut(ctx, git, repo, wt.Path, branch, input, result)
	}
	current, exists, err := refValue(ctx, git, repo, branch, failure.SandboxRuntimeFailed)
	if err != nil {
		return worktreeLeft{}, err
	}
	old := zeroOID(result)
	if exists {
		if current != input {
			return worktreeLeft{}, failure.New(failure.SandboxOutputConflict, "managed branch %s changed after the sandbox input was captured", worktreeKey)
		}
		old = input
	}
	return worktreeLeft{}, updateRef(ctx, git, repo, branch, result, old)
}

// treeLineMax bounds one line of measureTree's listing ("blob ", a
// 19-digit size and a NUL), so that a listing longer than
// (MaxWorktreeEntries+1)*treeLineMax bytes has too many entries.
const treeLineMax = 32

// measureTree lists commit's tree recursively, one short record per file
// (type and size), and returns why a checkout of it would exceed the
// budget ("" when it would not). The listing is capped, so a tree bomb
// (a few trees naming each other thousands of times) costs at most the
// cap before git is stopped; nothing is written.
func measureTree(ctx context.Context, git *Runner, repo, commit string, b Budget) (string, error) {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: resetTimeout, MaxOutput: int64(b.MaxWorktreeEntries+1) * treeLineMax},
		"ls-tree", "-r", "-z", "--full-tree", "--format=%(objecttype) %(objectsize)", commit)
	if errors.Is(err, errOutputLimit) {
		return fmt.Sprintf("the result tree has more than %d entries", b.MaxWorktreeEntries), nil
	}
	if err != nil {
		return "", err
	}
	entries, total := 0, int64(0)
	for _, rec := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		entries++
		typ, size, _ := strings.Cut(rec, " ")
		if typ != "blob" {
			continue
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil || n < 0 {
			return "", failure.New(failure.SandboxRuntimeFailed, "git ls-tree listed a malformed size")
		}
		total += n
		if total > b.MaxWorktreeBytes {
			return fmt.Sprintf("the result tree holds more than %d bytes", b.MaxWorktreeBytes), nil
		}
	}
	if entries > b.MaxWorktreeEntries {
		return fmt.Sprintf("the result tree has more than %d entries", b.MaxWorktreeEntries), nil
	}
	return "", nil
}

func moveCheckedOut(ctx context.Context, git *Runner, repo, dir, branch, input, result string) error {
	conflict := func(format string, args ...any) error {
		return failure.New(failure.SandboxOutputConflict, "managed worktree %s: "+format, append([]any{dir}, args...)...)
	}
	head, err := git.Run(ctx, dir, RunOpts{Timeout: shortTimeout, Code: failure.SandboxOutputConflict}, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return err
	}
	noFilters, err := filterOverrides(ctx, git, dir)
	if err != nil {
		return err
	}
	if strings.TrimSpace(head) != input {
		return conflict("HEAD moved after the sandbox input was captured")
	}
	status, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict, Config: noFilters},
		"status", "--porcelain=v1", "--untracked-files=no")
	if err != nil {
		return err
	}
	if strings.TrimSpace(status) != "" {
		return conflict("has uncommitted changes")
	}
	// A dry run of the two-tree fast-forward refuses when result would
	// overwrite untracked files, which reset --hard would silently clobber.
	if _, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict, Config: noFilters},
		"read-tree", "--dry-run", "-m", "-u", input, result); err != nil {
		if ExitCode(err) >= 0 {
			return conflict("cannot take the result without overwriting files%s", detail(err))
		}
		return err
	}
	if err := updateRef(ctx, git, repo, branch, result, input); err != nil {
		return err
	}
	if _, err := git.Run(ctx, dir, RunOpts{Timeout: resetTimeout, Code: failure.SandboxOutputConflict, Config: noFilters},
		"reset", "--hard", "--quiet"); err != nil {
		return failure.Wrap(failure.SandboxOutputConflict, err, "managed branch moved but worktree %s was not reset", dir)
	}
	return nil
}

// filterOverrides switches off every filter driver the repository's
// configuration defines (git-lfs, say): the result's .gitattributes is the
// task's, and it could otherwise aim a driver's command at the files it
// checks out on the host. Each filter.<name> gets empty clean, smudge and
// process commands, which git treats as no filter, and required=false.
func filterOverrides(ctx context.Context, git *Runner, dir string) ([]string, error) {
	out, err := git.Run(ctx, dir, RunOpts{Timeout: shortTimeout, MaxOutput: 1 << 20}, "config", "--name-only", "--get-regexp", `^filter\.`)
	if ExitCode(err) == 1 {
		return nil, nil // no filter configured
	}
	if err != nil {
		return nil, err
	}
	var config []string
	seen := map[string]bool{}
	for _, key := range strings.Split(strings.TrimSpace(out), "\n") {
		name := strings.TrimPrefix(key, "filter.")
		if i := strings.LastIndex(name, "."); i > 0 {
			name = name[:i]
		}
		if name == "" || seen[name] || strings.ContainsAny(name, "=\n") {
			continue
		}
		seen[name] = true
		for _, v := range []string{"clean=", "smudge=", "process=", "required=false"} {
			config = append(config, "filter."+name+"."+v)
		}
	}
	return config, nil
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
