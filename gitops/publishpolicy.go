package gitops

import (
	"context"
	"fmt"
	"net/mail"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// The operator's publish policy: what a bridge_push publication may carry.
// A result is the task's work, and once on the remote, a CI configuration
// it wrote runs with the repository's secrets, and an author it claimed
// reads as somebody else's work. Publish checks the policy over every
// commit the publication adds (input..result) before it contacts the
// remote, so a refused result is never pushed.

// Author policies: AuthorAny publishes the commits' authors as written;
// AuthorRequire refuses a result with a commit whose author or committer
// is not the policy's Identity; AuthorRewrite makes the policy's Identity
// the author and committer of every commit of a result that is to be
// published, at its import (ImportRequest.RewriteIdentity), and then
// checks it as AuthorRequire does.
const (
	AuthorAny     = "any"
	AuthorRequire = "require"
	AuthorRewrite = "rewrite"
)

// DefaultIdentity is the identity of the commits the in-sandbox worker
// makes (internal/worker's CommitAuthorName and CommitAuthorEmail).
var DefaultIdentity = Identity{Name: "forge sandbox", Email: "sandbox@forge.invalid"}

// DefaultForbiddenPaths are the CI configurations a result may not touch
// unless the operator says otherwise: GitHub Actions workflows and local
// actions, GitLab CI, CircleCI, Travis CI, Jenkins, Azure Pipelines,
// Buildkite, Bitbucket Pipelines, Drone and Woodpecker, and the code
// owners files that decide who must review.
var DefaultForbiddenPaths = []string{
	".github/workflows/", ".github/actions/", ".gitlab-ci.yml", ".gitlab/ci/", ".circleci/", ".travis.yml",
	"Jenkinsfile", "azure-pipelines.yml", ".azure-pipelines/", ".buildkite/", "bitbucket-pipelines.yml",
	".drone.yml", ".woodpecker.yml", ".woodpecker/", "CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS",
}

// Identity is a commit identity, "Name <email>".
type Identity struct{ Name, Email string }

func (i Identity) String() string { return i.Name + " <" + i.Email + ">" }

// ParseIdentity reads "Name <email>".
func ParseIdentity(s string) (Identity, error) {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" || a.Name != strings.TrimSpace(a.Name) || strings.ContainsAny(a.Name+a.Address, "<>\n\x00") {
		return Identity{}, fmt.Errorf("identity %q is not \"Name <email>\"", s)
	}
	return Identity{Name: a.Name, Email: a.Address}, nil
}

// PublishPolicy is the operator's rule on what a publication may carry.
// The zero policy allows everything.
type PublishPolicy struct {
	// ForbiddenPaths are the paths a published commit may not add, change
	// or remove: an entry ending in "/" is a directory and everything below
	// it, any other one file. Paths compare case-insensitively, and a
	// change to a directory above an entry (.github replaced by a symlink
	// or a file) is refused too.
	ForbiddenPaths []string
	// Author is AuthorAny (or empty), AuthorRequire or AuthorRewrite.
	Author string
	// Identity is the author and committer AuthorRequire demands and
	// AuthorRewrite writes.
	Identity Identity
}

// DefaultPublishPolicy forbids DefaultForbiddenPaths and keeps authors as
// written.
func DefaultPublishPolicy() PublishPolicy {
	return PublishPolicy{ForbiddenPaths: append([]string(nil), DefaultForbiddenPaths...), Author: AuthorAny, Identity: DefaultIdentity}
}

// Validate checks the policy's own shape: relative paths without dot
// segments, a known author policy, an identity when it is required.
func (p PublishPolicy) Validate() error {
	for _, path := range p.ForbiddenPaths {
		trimmed := strings.TrimSuffix(path, "/")
		if trimmed == "" || strings.HasPrefix(path, "/") || strings.Contains(path, "\\") {
			return fmt.Errorf("forbidden path %q is not a relative path of the repository", path)
		}
		for _, seg := range strings.Split(trimmed, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return fmt.Errorf("forbidden path %q is not a clean relative path", path)
			}
		}
	}
	switch p.Author {
	case "", AuthorAny:
	case AuthorRequire, AuthorRewrite:
		if p.Identity.Name == "" || p.Identity.Email == "" {
			return fmt.Errorf("author policy %q needs an identity", p.Author)
		}
	default:
		return fmt.Errorf("author policy %q is not %s, %s or %s", p.Author, AuthorAny, AuthorRequire, AuthorRewrite)
	}
	return nil
}

// forbids returns the policy entry that protects a changed path, or "".
func (p PublishPolicy) forbids(changed string) string {
	c := strings.ToLower(changed)
	for _, entry := range p.ForbiddenPaths {
		e := strings.ToLower(entry)
		dir := strings.HasSuffix(e, "/")
		switch {
		case c == strings.TrimSuffix(e, "/"), dir && strings.HasPrefix(c, e):
			return entry
		case strings.HasPrefix(e, c+"/"):
			return entry // a directory above the entry changed
		}
	}
	return ""
}

// checkPublishPolicy applies the policy to every commit in input..result
// of repo: the paths each changes (against its first parent for a merge,
// which is where a merge brings in something new) and, under
// AuthorRequire, each author and committer. A breach is
// failure.SandboxOutputPublishPolicy naming the path or the commit.
func checkPublishPolicy(ctx context.Context, git *Runner, repo, input, result string, p PublishPolicy) error {
	span := input + ".." + result
	opts := RunOpts{Timeout: shortTimeout * 4, MaxOutput: 64 << 20, Code: failure.SandboxOutputPublishPolicy}
	if len(p.ForbiddenPaths) > 0 {
		out, err := git.Run(ctx, repo, opts, "log", "--format=", "--name-only", "-z", "--no-renames",
			"--diff-merges=first-parent", "--no-ext-diff", "--no-textconv", span, "--")
		if err != nil {
			return err
		}
		for _, path := range strings.Split(out, "\x00") {
			path = strings.TrimLeft(path, "\n")
			if path == "" {
				continue
			}
			if entry := p.forbids(path); entry != "" {
				return failure.New(failure.SandboxOutputPublishPolicy,
					"publication refused: the result changes %q, which the operator's publish policy protects (%s in --publish-forbidden-paths)",
					text.Ellipsis(path, 200), entry)
			}
		}
	}
	if p.Author == AuthorRequire || p.Author == AuthorRewrite {
		out, err := git.Run(ctx, repo, opts, "log", "-z", "--no-mailmap", "--format=%H%x00%an%x00%ae%x00%cn%x00%ce", span, "--")
		if err != nil {
			return err
		}
		fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
		if out == "" {
			fields = nil
		}
		if len(fields)%5 != 0 {
			return failure.New(failure.SandboxOutputPublishPolicy, "publication refused: the result's commit identities could not be read")
		}
		for i := 0; i < len(fields); i += 5 {
			author := Identity{Name: fields[i+1], Email: fields[i+2]}
			committer := Identity{Name: fields[i+3], Email: fields[i+4]}
			if author != p.Identity || committer != p.Identity {
				return failure.New(failure.SandboxOutputPublishPolicy,
					"publication refused: commit %s is authored %q and committed %q, and the operator's publish policy requires %q (--publish-author-policy %s)",
					strings.TrimLeft(fields[i], "\n"), text.Ellipsis(author.String(), 200), text.Ellipsis(committer.String(), 200), p.Identity.String(), p.Author)
			}
		}
	}
	return nil
}

// RewriteIdentity is the identity the import of a result that is to be
// published (publishing says so) rewrites its commits to under
// AuthorRewrite, nil otherwise.
func (p PublishPolicy) RewriteIdentity(publishing bool) *Identity {
	if !publishing || p.Author != AuthorRewrite {
		return nil
	}
	id := p.Identity
	return &id
}
