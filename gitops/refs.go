package gitops

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Ref namespaces owned by forged in the host repository.
const (
	inputRefPrefix  = "refs/forge/inputs/"
	importRefPrefix = "refs/forge/imports/"
)

// shortTimeout bounds quick metadata calls (rev-parse, update-ref, ...).
const shortTimeout = 30 * time.Second

// attemptHex is the attempt id without hyphens, used to name temporary refs
// and the quarantine directory. It accepts only full lowercase UUIDs.
func attemptHex(attemptID string) (string, bool) {
	if !messages.IsFullUUID(attemptID) {
		return "", false
	}
	return strings.ReplaceAll(attemptID, "-", ""), true
}

// cleanAbs reports whether p is a clean absolute path.
func cleanAbs(p string) bool {
	return p != "" && filepath.IsAbs(p) && filepath.Clean(p) == p
}

// zeroOID is the all-zero object id as long as like, which git's
// update-ref takes as "the ref must not exist".
func zeroOID(like string) string { return strings.Repeat("0", len(like)) }

// refValue returns the object id the ref named exactly ref points to, and
// false when there is no such ref. for-each-ref matches prefixes, so the
// exact name is picked from its output.
func refValue(ctx context.Context, git *Runner, repo, ref string, code failure.Code) (string, bool, error) {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: code},
		"for-each-ref", "--format=%(objectname) %(refname)", ref)
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(out, "\n") {
		sha, name, ok := strings.Cut(line, " ")
		if ok && name == ref && messages.IsFullSHA(sha) {
			return sha, true, nil
		}
	}
	return "", false, nil
}

// peelCommit resolves rev to a commit id; false when it names no commit.
func peelCommit(ctx context.Context, git *Runner, repo, rev string, code failure.Code) (string, bool, error) {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: code},
		"rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		if ExitCode(err) == 1 {
			return "", false, nil
		}
		return "", false, err
	}
	sha := strings.TrimSpace(out)
	if !messages.IsFullSHA(sha) {
		return "", false, failure.New(code, "git rev-parse returned %q for %s", text.Ellipsis(sha, 80), rev)
	}
	return sha, true, nil
}

// resolveRefCommit returns the commit the exact ref points to (peeled).
func resolveRefCommit(ctx context.Context, git *Runner, repo, ref string, code failure.Code) (string, bool, error) {
	sha, ok, err := refValue(ctx, git, repo, ref, code)
	if err != nil || !ok {
		return "", false, err
	}
	return peelCommit(ctx, git, repo, sha, code)
}

// deleteRef removes a temporary ref even when ctx is already cancelled.
func deleteRef(ctx context.Context, git *Runner, repo, ref string) error {
	_, err := git.Run(context.WithoutCancel(ctx), repo, RunOpts{Timeout: shortTimeout}, "update-ref", "-d", ref)
	return err
}
