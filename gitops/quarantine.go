package gitops

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
)

const (
	quarantineFetchTimeout = 5 * time.Minute
	inventoryTimeout       = 2 * time.Minute
	fsckTimeout            = 10 * time.Minute
	walkTimeout            = 2 * time.Minute
	// inventoryLineBytes bounds one inventory line: a SHA-256 id, "commit",
	// a 19-digit size, two spaces and a newline.
	inventoryLineBytes = 96
)

// bundleRefName is what a bundle head may be called for forged to fetch it.
var bundleRefName = regexp.MustCompile(`^(HEAD|refs/[A-Za-z0-9._/-]+)$`)

// quarantine is a throw-away bare repository the untrusted bundle is
// fetched into and checked in before anything reaches the host repository.
//
// The bundle is thin (its prerequisites are the input commit's history), so
// git commands that need history see the host's object store as an
// alternate through GIT_ALTERNATE_OBJECT_DIRECTORIES; the object inventory
// runs without it and so measures only what the bundle brought in.
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
		return nil, nil, failure.New(failure.SandboxRuntimeFailed, "host object directory %q cannot be used as an alternate", truncate(objects, 120))
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
// ignored and auto-gc off; withHost lends it the host's objects.
func (q *quarantine) run(ctx context.Context, opts RunOpts, withHost bool, args ...string) (string, error) {
	opts.Env = append(opts.Env, "GIT_NO_REPLACE_OBJECTS=1")
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

// receive fetches the bundle head that carries result into importRef.
func (q *quarantine) receive(ctx context.Context, bundle, result, importRef string) error {
	heads, err := q.run(ctx, RunOpts{Timeout: shortTimeout, MaxOutput: 1 << 20}, false, "bundle", "list-heads", bundle)
	if err != nil {
		return err
	}
	ref := bundleHeadFor(heads, result)
	if ref == "" {
		return failure.New(failure.SandboxOutputInvalid, "bundle has no head at the manifest's result commit %s", result)
	}
	_, err = q.run(ctx, RunOpts{Timeout: quarantineFetchTimeout}, true,
		"fetch", "--quiet", "--no-write-fetch-head", "--no-tags", bundle, ref+":"+importRef)
	return err
}

// bundleHeadFor returns the name of the first head in `git bundle
// list-heads` output that points at sha and has a name forged can fetch.
func bundleHeadFor(heads, sha string) string {
	for _, line := range strings.Split(heads, "\n") {
		id, name, ok := strings.Cut(line, " ")
		if ok && id == sha && bundleRefName.MatchString(name) &&
			!strings.Contains(name, "..") && !strings.Contains(name, "//") && !strings.HasSuffix(name, "/") {
			return name
		}
	}
	return ""
}

// check validates what the bundle brought in: the object budget (before
// anything inflates objects), a strict fsck, the imported commit, its
// ancestry from input and the commit depth.
func (q *quarantine) check(ctx context.Context, importRef, input, result string, b Budget) error {
	inventory, err := q.run(ctx, RunOpts{Timeout: inventoryTimeout, MaxOutput: int64(b.MaxObjects) * inventoryLineBytes}, false,
		"cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	if err != nil {
		return err
	}
	if _, err := ParseObjectInventory(inventory, b); err != nil {
		return err
	}
	if _, err := q.run(ctx, RunOpts{Timeout: fsckTimeout, MaxOutput: 16 << 20}, true,
		"fsck", "--strict", "--full", "--no-reflogs", "--no-dangling", "--no-progress"); err != nil {
		return err
	}
	imported, err := q.run(ctx, RunOpts{Timeout: shortTimeout}, true, "rev-parse", "--verify", importRef+"^{commit}")
	if err != nil {
		return err
	}
	if strings.TrimSpace(imported) != result {
		return failure.New(failure.SandboxOutputInvalid, "imported result commit differs from the manifest")
	}
	if _, err := q.run(ctx, RunOpts{Timeout: walkTimeout}, true, "merge-base", "--is-ancestor", input, result); err != nil {
		if ExitCode(err) == 1 {
			return failure.New(failure.SandboxOutputInvalid, "result commit %s is not descended from input commit %s", result, input)
		}
		return err
	}
	depth, err := q.run(ctx, RunOpts{Timeout: walkTimeout}, true, "rev-list", "--count", input+".."+result)
	if err != nil {
		return err
	}
	_, err = ParseCommitDepth(depth, b)
	return err
}

// lendHostObjects makes the host's objects permanently visible to the
// quarantine, so that git serving a fetch from it (which does not inherit
// GIT_ALTERNATE_OBJECT_DIRECTORIES) can walk into the host's history.
func (q *quarantine) lendHostObjects() error {
	path := filepath.Join(q.dir, "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return failure.Wrap(failure.SandboxRuntimeFailed, err, "prepare quarantine alternates")
	}
	if err := os.WriteFile(path, []byte(q.hostObjects+"\n"), 0o600); err != nil {
		return failure.Wrap(failure.SandboxRuntimeFailed, err, "write quarantine alternates")
	}
	return nil
}
