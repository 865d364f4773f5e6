package gitops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Files read from the sandbox config commit.
const (
	ContractPath   = ".forge/forge.sandbox.yml"
	DockerfilePath = ".forge/Dockerfile"
	// MaxConfigFileBytes bounds each of ContractPath and DockerfilePath.
	MaxConfigFileBytes = 1 << 20
)

// Input file names inside PrepareRequest.WorkDir.
const (
	InputDirName = "input"
	InputBundle  = "repo.bundle"
)

const (
	fetchTimeout  = 5 * time.Minute
	bundleTimeout = 5 * time.Minute
)

// PrepareRequest describes the inputs of one attempt.
type PrepareRequest struct {
	RepoPath, AttemptID, WorktreeKey, BaseBranch, DefaultBranch, ExecutionPolicy, ApprovedConfigSHA string
	// WorkDir is the attempt-private directory (0700) where the bundle is
	// written.
	WorkDir string
	// ContextMemoDir is the host's directory of build context digests
	// (contextmemo.go); empty computes the digest every time.
	ContextMemoDir string
}

// Prepared is what Prepare produced for the sandbox.
type Prepared struct {
	// InputCommitSHA is the commit the sandbox starts from.
	InputCommitSHA string
	// ConfigCommitSHA is the commit the sandbox configuration is read from.
	ConfigCommitSHA string
	// ContractSource is .forge/forge.sandbox.yml at the config commit.
	ContractSource []byte
	// Dockerfile is .forge/Dockerfile at the config commit.
	Dockerfile []byte
	// BundlePath is WorkDir/input/repo.bundle: the full history of the input
	// commit under the ref refs/forge/inputs/<attemptHex>.
	BundlePath string
	// ContextDigest is the lowercase hex sha256 of the image build context:
	// the tar of the config commit's tree as committed, written from its
	// objects with no attribute processing (see context.go) by OpenContext,
	// only when an image is built (see contextmemo.go).
	ContextDigest string
	// context is what OpenContext writes the build context from.
	context *buildContext
}

// Prepare captures an attempt's input from the host repository: it
// refreshes origin (best effort), resolves the input commit (the managed
// branch, else the base branch, else origin's base branch) and the sandbox
// config commit (the server-approved one, else the default branch), reads the
// contract and Dockerfile from the config commit, bundles the input commit
// and takes the digest of the build context, the config commit's tree (from
// the memo when the tree is known: the tar is written by OpenContext).
//
// Prepare does not lock: the caller holds AcquireRepoLock for RepoPath.
// The temporary ref it bundles from is deleted before it returns.
func Prepare(ctx context.Context, git *Runner, req PrepareRequest) (*Prepared, error) {
	hexID, err := req.validate()
	if err != nil {
		return nil, err
	}
	repo := req.RepoPath
	if err := checkObjectFormat(ctx, git, repo); err != nil {
		return nil, err
	}
	if err := fetchOrigin(ctx, git, repo); err != nil {
		return nil, err
	}
	input, err := resolveInput(ctx, git, req)
	if err != nil {
		return nil, err
	}
	config, err := resolveConfig(ctx, git, req)
	if err != nil {
		return nil, err
	}
	files, err := readConfigFiles(ctx, git, repo, config, ContractPath, DockerfilePath)
	if err != nil {
		return nil, err
	}

	inputDir := filepath.Join(req.WorkDir, InputDirName)
	if err := os.MkdirAll(inputDir, 0o700); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "create input directory")
	}
	p := &Prepared{
		InputCommitSHA:  input,
		ConfigCommitSHA: config,
		ContractSource:  files[0],
		Dockerfile:      files[1],
		BundlePath:      filepath.Join(inputDir, InputBundle),
	}
	if err := bundleInput(ctx, git, repo, inputRefPrefix+hexID, input, p.BundlePath); err != nil {
		return nil, err
	}
	if err := p.digestContext(ctx, git, repo, req.ContextMemoDir); err != nil {
		return nil, err
	}
	return p, nil
}

// digestContext sets p's build context and its digest: the memoized one
// when the config commit's tree and time have one, else computed (the tar
// streamed into the hash, not written) and memoized.
func (p *Prepared) digestContext(ctx context.Context, git *Runner, repo, memoDir string) error {
	tree, when, err := commitTreeTime(ctx, git, repo, p.ConfigCommitSHA)
	if err != nil {
		return err
	}
	c := &buildContext{repo: repo, commit: p.ConfigCommitSHA, when: when, memoDir: memoDir, memo: newContextMemo(tree, when)}
	p.context = c
	if digest, ok := lookupContextMemo(memoDir, c.memo); ok {
		p.ContextDigest, c.memoized = digest, true
		return nil
	}
	if p.ContextDigest, err = contextDigest(ctx, git, c); err != nil {
		return err
	}
	if memoDir != "" {
		m := c.memo
		m.Digest = p.ContextDigest
		_ = storeContextMemo(memoDir, m) // a cache: the next attempt computes again
	}
	return nil
}

func (req PrepareRequest) validate() (string, error) {
	hexID, ok := attemptHex(req.AttemptID)
	switch {
	case !ok:
		return "", failure.New(failure.SandboxInputFailed, "attempt id %q is not a full UUID", text.Ellipsis(req.AttemptID, 64))
	case !cleanAbs(req.RepoPath):
		return "", failure.New(failure.SandboxInputFailed, "repository path must be a clean absolute path")
	case !cleanAbs(req.WorkDir):
		return "", failure.New(failure.SandboxInputFailed, "work directory must be a clean absolute path")
	case !messages.ValidBranch(req.WorktreeKey):
		return "", failure.New(failure.SandboxInputFailed, "worktree key %q is not a valid branch name", text.Ellipsis(req.WorktreeKey, 64))
	case req.BaseBranch != "" && !messages.ValidBranch(req.BaseBranch):
		return "", failure.New(failure.SandboxInputFailed, "base branch %q is not a valid branch name", text.Ellipsis(req.BaseBranch, 64))
	case !messages.ValidBranch(req.DefaultBranch):
		return "", failure.New(failure.SandboxInputFailed, "default branch %q is not a valid branch name", text.Ellipsis(req.DefaultBranch, 64))
	}
	return hexID, nil
}

// originProtocols are the transports the origin refresh may use: the
// operator configures origin, but never through ext:: or fd::.
var originProtocols = []string{"protocol.https.allow=always", "protocol.ssh.allow=always", "protocol.file.allow=always"}

// fetchOrigin refreshes origin when the repository has one. Failures are
// ignored (the host may be offline); only cancellation is reported.
func fetchOrigin(ctx context.Context, git *Runner, repo string) error {
	if _, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout}, "config", "--get", "remote.origin.url"); err == nil {
		_, _ = git.Run(ctx, repo, RunOpts{Timeout: fetchTimeout, Config: originProtocols}, "fetch", "--prune", "--quiet", "origin")
	}
	if err := ctx.Err(); err != nil {
		return failure.Wrap(failure.SandboxInputFailed, err, "prepare interrupted")
	}
	return nil
}

// inputRefs lists the refs the input commit is taken from, by precedence.
func inputRefs(worktreeKey, baseBranch string) []string {
	return []string{
		"refs/heads/" + worktreeKey,
		"refs/heads/" + baseBranch,
		"refs/remotes/origin/" + baseBranch,
	}
}

func resolveInput(ctx context.Context, git *Runner, req PrepareRequest) (string, error) {
	base := req.BaseBranch
	if base == "" {
		base = req.DefaultBranch
	}
	refs := inputRefs(req.WorktreeKey, base)
	if sha, err := resolveFirst(ctx, git, req.RepoPath, refs); sha != "" || err != nil {
		return sha, err
	}
	return "", failure.New(failure.SandboxInputFailed, "no input ref could be resolved (tried %s)", strings.Join(refs, ", "))
}

// resolveConfig picks the sandbox config commit: the approved commit when
// the server sent one (mandatory under sandbox_required), else the default
// branch.
func resolveConfig(ctx context.Context, git *Runner, req PrepareRequest) (string, error) {
	approved := strings.ToLower(strings.TrimSpace(req.ApprovedConfigSHA))
	if approved == "" {
		if req.ExecutionPolicy == messages.PolicySandboxRequired {
			return "", failure.New(failure.SandboxConfigUnapproved, "sandbox_required dispatches need a server-approved config commit")
		}
		refs := []string{"refs/heads/" + req.DefaultBranch, "refs/remotes/origin/" + req.DefaultBranch}
		if sha, err := resolveFirst(ctx, git, req.RepoPath, refs); sha != "" || err != nil {
			return sha, err
		}
		return "", failure.New(failure.SandboxInputFailed, "default branch %q could not be resolved for the sandbox config", req.DefaultBranch)
	}
	if !messages.IsFullSHA(approved) {
		return "", failure.New(failure.SandboxConfigInvalid, "approved sandbox config commit is not a full object id")
	}
	sha, ok, err := peelCommit(ctx, git, req.RepoPath, approved, failure.SandboxInputFailed)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", failure.New(failure.SandboxInputFailed, "approved sandbox config commit %s is not a commit in the repository", approved)
	case sha != approved:
		return "", failure.New(failure.SandboxConfigMismatch, "approved sandbox config commit %s resolves to a different commit %s", approved, sha)
	}
	return sha, nil
}

// resolveFirst returns the commit of the first ref that resolves, or "".
func resolveFirst(ctx context.Context, git *Runner, repo string, refs []string) (string, error) {
	for _, ref := range refs {
		sha, ok, err := resolveRefCommit(ctx, git, repo, ref, failure.SandboxInputFailed)
		if err != nil {
			return "", err
		}
		if ok {
			return sha, nil
		}
	}
	return "", nil
}

// readConfigFiles reads regular files (no symlinks, no submodules) from the
// config commit, bounded by MaxConfigFileBytes.
func readConfigFiles(ctx context.Context, git *Runner, repo, commit string, paths ...string) ([][]byte, error) {
	args := append([]string{"ls-tree", "-z", "--full-tree", commit, "--"}, paths...)
	out, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: failure.SandboxInputFailed}, args...)
	if err != nil {
		return nil, err
	}
	entries := parseTreeListing(out)
	contents := make([][]byte, len(paths))
	for i, path := range paths {
		e, ok := entries[path]
		switch {
		case !ok:
			return nil, failure.New(failure.SandboxInputFailed, "config commit %s has no %s", commit, path)
		case e.typ != "blob" || (e.mode != "100644" && e.mode != "100755"):
			return nil, failure.New(failure.SandboxInputFailed, "%s at config commit %s is not a regular file", path, commit)
		}
		data, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, MaxOutput: MaxConfigFileBytes, Code: failure.SandboxInputFailed},
			"cat-file", "blob", e.oid)
		if err != nil {
			return nil, err
		}
		contents[i] = []byte(data)
	}
	return contents, nil
}

type treeEntry struct{ mode, typ, oid string }

// parseTreeListing parses `ls-tree -z` output into entries by path.
func parseTreeListing(out string) map[string]treeEntry {
	entries := make(map[string]treeEntry)
	for _, rec := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		if f := strings.Fields(meta); len(f) == 3 {
			entries[path] = treeEntry{mode: f[0], typ: f[1], oid: f[2]}
		}
	}
	return entries
}

// bundleInput writes a bundle of commit's history under the temporary ref,
// which is deleted whatever happens.
func bundleInput(ctx context.Context, git *Runner, repo, ref, commit, path string) (err error) {
	if _, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: failure.SandboxInputFailed},
		"update-ref", "-m", "forged: sandbox input", ref, commit); err != nil {
		return err
	}
	defer func() {
		if delErr := deleteRef(ctx, git, repo, ref); delErr != nil && err == nil {
			err = failure.Wrap(failure.SandboxInputFailed, delErr, "delete temporary input ref %s", ref)
		}
	}()
	_, err = git.Run(ctx, repo, RunOpts{Timeout: bundleTimeout, Code: failure.SandboxInputFailed},
		"bundle", "create", "--quiet", path, ref)
	return err
}
