package gitops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

const (
	indexTimeout = 10 * time.Minute
	walkTimeout  = 2 * time.Minute
)

// bundleRefName is what a bundle head may be called for forged to fetch it.
var bundleRefName = regexp.MustCompile(`^(HEAD|refs/[A-Za-z0-9._/-]+)$`)

// quarantine is a throw-away bare repository the untrusted bundle is
// fetched into and checked in before anything reaches the host repository.
//
// The bundle's pack must be self-contained (no deltas against objects
// outside it), but its commits link into the input commit's history, so
// git commands that walk history see the host's object store as an
// alternate through GIT_ALTERNATE_OBJECT_DIRECTORIES. The checks decide
// from the pack's own object list what came from the bundle.
type quarantine struct {
	git         *Runner
	dir         string
	hostObjects string
}

// newQuarantine creates a fresh bare repository at
// stateRoot/quarantine/<attemptHex> (0700) with the host's object format.
// The returned cleanup removes it.
func newQuarantine(ctx context.Context, git *Runner, repo, stateRoot, hexID string) (*quarantine, func(), error) {
	objects, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout},
		"rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return nil, nil, err
	}
	objects = strings.TrimSuffix(objects, "\n")
	if !filepath.IsAbs(objects) || strings.ContainsAny(objects, ":\n\"") {
		return nil, nil, failure.New(failure.SandboxRuntimeFailed, "host object directory %q cannot be used as an alternate", text.Ellipsis(objects, 120))
	}
	format, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout}, "rev-parse", "--show-object-format")
	if err != nil {
		return nil, nil, err
	}

	parent := filepath.Join(stateRoot, "quarantine")
	dir := filepath.Join(parent, hexID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, nil, failure.Wrap(failure.SandboxRuntimeFailed, err, "create quarantine root")
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, failure.Wrap(failure.SandboxRuntimeFailed, err, "remove stale quarantine")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, nil, failure.Wrap(failure.SandboxRuntimeFailed, err, "create quarantine")
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if _, err := git.Run(ctx, "", RunOpts{Timeout: shortTimeout},
		"-c", "init.defaultBranch=quarantine", "init", "--quiet", "--bare", "--template=",
		"--object-format="+strings.TrimSpace(format), dir); err != nil {
		cleanup()
		return nil, nil, err
	}
	return &quarantine{git: git, dir: dir, hostObjects: objects}, cleanup, nil
}

// run runs git in the quarantine with fsck on transfer, replace objects
// ignored and auto-gc off; withHost lends it the host's objects for this
// call (to resolve links into the input's history, never to check them).
func (q *quarantine) run(ctx context.Context, opts RunOpts, withHost bool, args ...string) (string, error) {
	if withHost {
		opts.Env = append(opts.Env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+q.hostObjects)
	}
	if opts.Code == "" {
		opts.Code = failure.SandboxOutputInvalid
	}
	full := append([]string{
		"-c", "transfer.fsckObjects=true",
		"-c", "fetch.fsckObjects=true",
		"-c", "gc.auto=0",
	}, args...)
	return q.git.Run(ctx, q.dir, opts, full...)
}

// receive measures the bundle's pack against the budget (ScanPack), then
// has git index it strictly into the quarantine, and returns the ids of
// the objects the pack holds. Nothing inflates an object before ScanPack
// accepted the pack.
//
// `index-pack --strict` runs the fsck checks (strict: warnings are errors)
// on every object of the pack and on nothing else; objects the pack links
// to must be in the pack or in the host repository, whose objects it
// borrows only to see that they exist. A malformed object elsewhere in the
// host repository is therefore never looked at.
func (q *quarantine) receive(ctx context.Context, bundle string, h *BundleHeader, b Budget) (map[string]bool, PackStats, error) {
	section := func() (io.Reader, func(), error) {
		f, err := os.Open(bundle)
		if err != nil {
			return nil, nil, failure.Wrap(failure.SandboxOutputInvalid, err, "open result bundle")
		}
		if _, err := f.Seek(h.PackOffset, io.SeekStart); err != nil {
			f.Close()
			return nil, nil, failure.Wrap(failure.SandboxOutputInvalid, err, "seek result bundle")
		}
		return f, func() { f.Close() }, nil
	}
	pack, done, err := section()
	if err != nil {
		return nil, PackStats{}, err
	}
	stats, err := ScanPack(ctxReader{ctx: ctx, r: pack}, b)
	done()
	if err != nil {
		return nil, PackStats{}, err
	}
	if pack, done, err = section(); err != nil {
		return nil, PackStats{}, err
	}
	defer done()
	out, err := q.run(ctx, RunOpts{Timeout: indexTimeout, Stdin: pack, MaxOutput: 4 << 10}, true,
		"index-pack", "--strict", "--stdin")
	if err != nil {
		return nil, PackStats{}, err
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(out), "pack\t")
	if !ok || !isObjectID(name) {
		return nil, PackStats{}, failure.New(failure.SandboxRuntimeFailed, "git index-pack reported %q", text.Ellipsis(out, 80))
	}
	idx, err := os.Open(filepath.Join(q.dir, "objects", "pack", "pack-"+name+".idx"))
	if err != nil {
		return nil, PackStats{}, failure.Wrap(failure.SandboxRuntimeFailed, err, "open quarantine pack index")
	}
	defer idx.Close()
	ids, err := ParsePackIndexIDs(bufio.NewReader(idx), stats.Objects)
	if err != nil {
		return nil, PackStats{}, err
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, stats, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// checkRequest is what check verifies the quarantined pack against.
type checkRequest struct {
	input, result string
	prerequisites []string
	squash        bool
	budget        Budget
}

// check proves the result from the quarantine, borrowing the host's
// objects only to walk the input's history:
//
//   - the result commit is in the pack;
//   - every bundle prerequisite is the input commit or one of its
//     ancestors;
//   - the commits between input and result are within the depth budget;
//   - the result descends from the input (squash: its only parent is the
//     input);
//   - every object reachable from the result and not from the input is in
//     the pack, so the result can reference no host object outside the
//     input's history.
//
// It returns the commit count and the newest commits (sha, subject).
func (q *quarantine) check(ctx context.Context, pack map[string]bool, req checkRequest) (int, []messages.ResultCommit, error) {
	invalid := func(format string, args ...any) (int, []messages.ResultCommit, error) {
		return 0, nil, failure.New(failure.SandboxOutputInvalid, format, args...)
	}
	input, result, b := req.input, req.result, req.budget
	if !pack[result] {
		return invalid("the result commit %s is not in the result bundle", result)
	}
	if typ, err := q.run(ctx, RunOpts{Timeout: shortTimeout}, false, "cat-file", "-t", result); err != nil {
		return 0, nil, err
	} else if strings.TrimSpace(typ) != "commit" {
		return invalid("the result %s is not a commit", result)
	}
	for _, p := range req.prerequisites {
		if p == input {
			continue
		}
		if err := q.isAncestor(ctx, p, input); err != nil {
			return invalid("bundle prerequisite %s is not in the input commit's history", p)
		}
	}
	out, err := q.run(ctx, RunOpts{Timeout: walkTimeout}, true, "rev-list", "--count", input+".."+result)
	if err != nil {
		return 0, nil, err
	}
	depth, err := ParseCommitDepth(out, b)
	if err != nil {
		return 0, nil, err
	}
	if err := q.isAncestor(ctx, input, result); err != nil {
		if ExitCode(err) == 1 {
			return invalid("result commit %s is not descended from input commit %s", result, input)
		}
		return 0, nil, err
	}
	if req.squash {
		parents, err := q.run(ctx, RunOpts{Timeout: shortTimeout}, true, "rev-list", "--parents", "--max-count=1", result)
		if err != nil {
			return 0, nil, err
		}
		if strings.TrimSpace(parents) != result+" "+input {
			return invalid("a squash result must be one commit whose only parent is the input commit")
		}
	}
	// Every listed object must be in the pack: only the input's history
	// (walked from the input commit) is excluded from the listing.
	idLen := int64(len(result) + 1)
	listing, err := q.run(ctx, RunOpts{Timeout: walkTimeout, MaxOutput: (int64(len(pack)) + 1) * idLen}, true,
		"rev-list", "--objects", "--no-object-names", result, "--not", input)
	if errors.Is(err, errOutputLimit) {
		return invalid("the result needs objects that are neither in the result bundle nor in the input commit's history")
	}
	if err != nil {
		return 0, nil, err
	}
	for _, id := range strings.Fields(listing) {
		if !pack[id] {
			return invalid("the result needs object %s, which is neither in the result bundle nor in the input commit's history", id)
		}
	}
	list, err := q.summaries(ctx, input, result)
	if err != nil {
		return 0, nil, err
	}
	return depth, list, nil
}

// isAncestor runs merge-base --is-ancestor (exit status 1: not an ancestor).
func (q *quarantine) isAncestor(ctx context.Context, ancestor, descendant string) error {
	_, err := q.run(ctx, RunOpts{Timeout: walkTimeout}, true, "merge-base", "--is-ancestor", ancestor, descendant)
	return err
}

// summaries lists the newest messages.MaxReportedCommits commits of
// input..result as (sha, subject), subjects made printable and bounded.
func (q *quarantine) summaries(ctx context.Context, input, result string) ([]messages.ResultCommit, error) {
	out, err := q.run(ctx, RunOpts{Timeout: walkTimeout, MaxOutput: 1 << 20}, true,
		"rev-list", "--no-commit-header", "--format=%H%x00%s", fmt.Sprintf("--max-count=%d", messages.MaxReportedCommits),
		input+".."+result)
	if err != nil {
		return nil, err
	}
	var list []messages.ResultCommit
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		sha, subject, ok := strings.Cut(line, "\x00")
		if !ok || !isObjectID(sha) {
			return nil, failure.New(failure.SandboxRuntimeFailed, "git rev-list listed a malformed commit line")
		}
		list = append(list, messages.ResultCommit{SHA: sha, Subject: messages.BoundedSubject(subject)})
	}
	return list, nil
}

// publish points the quarantine's importRef at result and makes the host's
// objects permanently visible to it, so that git serving a fetch from it
// (which does not inherit GIT_ALTERNATE_OBJECT_DIRECTORIES) can walk into
// the host's history.
func (q *quarantine) publish(ctx context.Context, importRef, result string) error {
	if _, err := q.run(ctx, RunOpts{Timeout: shortTimeout, Code: failure.SandboxRuntimeFailed}, true,
		"update-ref", importRef, result, zeroOID(result)); err != nil {
		return err
	}
	path := filepath.Join(q.dir, "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return failure.Wrap(failure.SandboxRuntimeFailed, err, "prepare quarantine alternates")
	}
	if err := os.WriteFile(path, []byte(q.hostObjects+"\n"), 0o600); err != nil {
		return failure.Wrap(failure.SandboxRuntimeFailed, err, "write quarantine alternates")
	}
	return nil
}
