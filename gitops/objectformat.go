package gitops

import (
	"context"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// checkObjectFormat refuses a repository whose objects are not named by
// SHA-1. The host's git reads SHA-256 repositories, but the worker's git
// (go-git) chooses its hash when it is compiled, and its build is SHA-1's:
// an input bundle of SHA-256 objects (a v3 bundle) could not be read in
// the sandbox, so the attempt is refused before anything is prepared.
func checkObjectFormat(ctx context.Context, git *Runner, repo string) error {
	out, err := git.Run(ctx, repo, RunOpts{Code: failure.SandboxInputFailed}, "rev-parse", "--show-object-format")
	if err != nil {
		return err
	}
	switch format := strings.TrimSpace(out); format {
	case "sha1":
		return nil
	case "sha256":
		return failure.New(failure.SandboxRepositoryUnsupported,
			"the repository uses SHA-256 object names, which the sandbox's git cannot read yet: run the attempt on a SHA-1 repository")
	default:
		return failure.New(failure.SandboxRepositoryUnsupported, "the repository's object format %q is unknown", text.Ellipsis(format, 32))
	}
}
