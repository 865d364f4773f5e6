package gitops

import (
	"context"
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Publication limits and timeouts.
const (
	// MaxCredentialSecretBytes bounds a publication secret.
	MaxCredentialSecretBytes = 16 << 10
	lsRemoteTimeout          = time.Minute
	pushTimeout              = 5 * time.Minute
)

var (
	// githubRemote is the only remote shape ValidateGitHubRemote admits:
	// https://github.com/<owner>/<repo>.git, scheme and host in any case,
	// nothing else (no port, userinfo, query, fragment, escapes or extra
	// path segments).
	githubRemote = regexp.MustCompile(`^(?i:https)://(?i:github\.com)/([A-Za-z0-9_.-]+)/[A-Za-z0-9_.-]+\.git$`)
	// credentialUser is the accepted shape of a publication username.
	credentialUser = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// Reasons a credential is refused. They are fixed texts: a refusal never
// echoes the remote URL (it may carry userinfo), the username or the secret.
const (
	reasonRemote   = "remote URL is not an accepted publication remote"
	reasonUsername = "username is not 1-64 characters of [A-Za-z0-9_-]"
	reasonSecret   = "secret is empty, longer than 16 KiB or holds CR, LF or NUL"
	reasonExpired  = "credential has expired"
)

// Credential is a redeemed, short-lived publication credential: HTTP basic
// auth for one remote repository.
type Credential struct {
	// RemoteURL is the repository to push to.
	RemoteURL string
	// Username and Secret form the basic-auth pair.
	Username, Secret string
	// ExpiresAt is when the credential stops being usable; the zero time is
	// already expired.
	ExpiresAt time.Time
}

// RemoteValidator decides whether a remote URL may be published to. It is
// injectable so that tests can publish to a local repository; the default
// is ValidateGitHubRemote. Its error text is not shown (it might quote the
// URL); the error is only kept in the chain.
type RemoteValidator func(remoteURL string) error

// ValidateGitHubRemote accepts exactly https://github.com/<owner>/<repo>.git
// where owner and repo are made of [A-Za-z0-9_.-] (the owner not "." or
// "..") and scheme and host may be in any case. Anything else (another
// scheme or host, a port, even an empty one, userinfo, a query or fragment,
// even empty, percent-escapes, dot segments, further path segments, or
// surrounding whitespace) is failure.SandboxOutputPublishForbid. The error
// does not quote the URL.
func ValidateGitHubRemote(remoteURL string) error {
	m := githubRemote.FindStringSubmatch(remoteURL)
	if m == nil || m[1] == "." || m[1] == ".." {
		return failure.New(failure.SandboxOutputPublishForbid, "publication remote is not https://github.com/<owner>/<repo>.git")
	}
	return nil
}

// ValidateCredential applies the publication credential rules: the remote
// passes validateRemote (ValidateGitHubRemote when nil); the username
// matches ^[A-Za-z0-9_-]{1,64}$; the secret is non-empty, at most
// MaxCredentialSecretBytes bytes and free of CR, LF and NUL; and now is
// before ExpiresAt. A violation is failure.SandboxOutputPublishForbid with a
// fixed message naming the rule and never the credential's values.
func ValidateCredential(c Credential, now time.Time, validateRemote RemoteValidator) error {
	if validateRemote == nil {
		validateRemote = ValidateGitHubRemote
	}
	if err := validateRemote(c.RemoteURL); err != nil {
		return failure.WrapWithheld(failure.SandboxOutputPublishForbid, err, "publication credential refused: %s", reasonRemote)
	}
	refuse := func(reason string) error {
		return failure.New(failure.SandboxOutputPublishForbid, "publication credential refused: %s", reason)
	}
	switch {
	case !credentialUser.MatchString(c.Username):
		return refuse(reasonUsername)
	case c.Secret == "" || len(c.Secret) > MaxCredentialSecretBytes || strings.ContainsAny(c.Secret, "\r\n\x00"):
		return refuse(reasonSecret)
	case !now.Before(c.ExpiresAt):
		return refuse(reasonExpired)
	}
	return nil
}

// credentialAuth is the basic-auth material of a credential and the texts
// that must be scrubbed from anything git prints.
type credentialAuth struct {
	config  []string
	env     []string
	secrets []string
}

// newCredentialAuth builds the configuration that hands git the credential
// as an extra HTTP header scoped to the remote's scheme://host/ (for GitHub
// http.https://github.com/.extraHeader), so it is never in a URL or argv
// (the Runner passes configuration through the environment).
// A remote without a host (a path, file://) gets a file:/// scope, which
// git never sends headers to. Tracing is forced to redact.
func newCredentialAuth(c Credential) credentialAuth {
	encoded := base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Secret))
	header := "Authorization: Basic " + encoded
	return credentialAuth{
		config: []string{extraHeaderKey(c.RemoteURL) + "=" + header},
		env: []string{
			"GIT_TERMINAL_PROMPT=0",
			"GCM_INTERACTIVE=never",
			"GIT_TRACE_REDACT=1",
		},
		secrets: []string{header, encoded, c.Secret},
	}
}

// publicationProtocol allows the one transport protocol of a publication
// remote that the RemoteValidator admitted, everything else staying at the
// Runner's protocol.allow=never: https (the only one ValidateGitHubRemote
// admits), or http or file for a remote an injected validator admitted. A
// local path is the file protocol; any other scheme (ext, fd, ssh, ...)
// gets nothing and git refuses it.
func publicationProtocol(remoteURL string) []string {
	if strings.HasPrefix(remoteURL, "/") {
		return []string{"protocol.file.allow=always"}
	}
	u, err := url.Parse(remoteURL)
	if err != nil {
		return nil
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https", "http", "file":
		return []string{"protocol." + scheme + ".allow=always"}
	}
	return nil
}

// extraHeaderKey is the config key scoping the auth header to the remote's
// scheme and host (lowercased; git normalises both when matching).
func extraHeaderKey(remoteURL string) string {
	scheme, host := "file", ""
	if u, err := url.Parse(remoteURL); err == nil && u.Scheme != "" && u.Host != "" {
		scheme, host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	}
	return "http." + scheme + "://" + host + "/.extraHeader"
}

// PushArgs is the pure decision of a publication, given the commit the
// remote branch was observed at (remoteSHA, "" when the branch is absent):
//
//   - an invalid branch name, object ids that are not full lowercase ids,
//     or an empty remote or one starting with "-":
//     failure.SandboxOutputPublishReject;
//   - the remote already holds result: noop, nothing to push;
//   - the remote holds anything but input: failure.SandboxOutputPublishStale;
//   - otherwise the push arguments, leased on remoteSHA:
//     push --porcelain <remote> <result>:refs/heads/<branch>
//     --force-with-lease=refs/heads/<branch>:<remoteSHA>, where an empty
//     remoteSHA makes git refuse if the branch has appeared meanwhile.
func PushArgs(branch, result, input, remoteSHA, remote string) (args []string, noop bool, err error) {
	if err := checkPushInputs(branch, result, input, remoteSHA, remote); err != nil {
		return nil, false, err
	}
	if remoteSHA == result {
		return nil, true, nil
	}
	if remoteSHA != "" && remoteSHA != input {
		return nil, false, failure.New(failure.SandboxOutputPublishStale,
			"remote branch %s moved after the sandbox input was captured", branch)
	}
	ref := "refs/heads/" + branch
	return []string{
		"push", "--porcelain", remote,
		result + ":" + ref,
		"--force-with-lease=" + ref + ":" + remoteSHA,
	}, false, nil
}

func checkPushInputs(branch, result, input, remoteSHA, remote string) error {
	if remote == "" || strings.HasPrefix(remote, "-") {
		return failure.New(failure.SandboxOutputPublishReject, "publication remote is empty or looks like an option")
	}
	return checkPushIDs(branch, result, input, remoteSHA)
}

// checkPushIDs checks the branch name and the object ids (remoteSHA may
// be empty) of a publication.
func checkPushIDs(branch, result, input, remoteSHA string) error {
	if !messages.ValidBranch(branch) || !isObjectID(result) || !isObjectID(input) || (remoteSHA != "" && !isObjectID(remoteSHA)) {
		return failure.New(failure.SandboxOutputPublishReject, "publication inputs contain an invalid branch or object id")
	}
	return nil
}

// PublishRequest describes one bridge_push publication of an imported
// result to the credential's remote.
type PublishRequest struct {
	// RepoPath is the host repository holding the result commit.
	RepoPath string
	// Branch is the remote branch, refs/heads/<Branch> (the worktree key).
	Branch string
	// InputCommitSHA is what the sandbox started from; ResultCommitSHA is
	// what it produced (already imported into RepoPath).
	InputCommitSHA, ResultCommitSHA string
	// Credential is the redeemed publication credential.
	Credential Credential
	// AssertCurrent re-checks that the attempt is still current (same
	// attempt and fence, lease unexpired, not cancelled). It runs before
	// contacting the remote, immediately before the push (or before
	// reporting a no-op) and after the push; its error is returned as is.
	// Nil means always current.
	AssertCurrent func() error
	// ValidateRemote vets Credential.RemoteURL; nil means
	// ValidateGitHubRemote.
	ValidateRemote RemoteValidator
	// Now is the clock for the credential's expiry; nil means time.Now.
	Now func() time.Time
	// Policy is the operator's publish policy, checked over
	// input..result before the remote is contacted (the zero policy
	// allows everything).
	Policy PublishPolicy
}

// PublishResult reports a publication.
type PublishResult struct {
	// Pushed is true when the remote branch was updated by this call.
	Pushed bool
	// RemoteSHA is what the remote branch held before publication ("" when
	// it did not exist); the push was leased on it.
	RemoteSHA string
}

// Publish pushes ResultCommitSHA to refs/heads/<Branch> of the credential's
// remote. It validates the request and the credential (see
// ValidateCredential; failure.SandboxOutputPublishForbid), checks the branch
// with `git check-ref-format --branch`, asks AssertCurrent, reads the
// remote branch with ls-remote and decides with PushArgs (after the
// operator's Policy passed, failure.SandboxOutputPublishPolicy otherwise): a no-op when the
// remote already holds the result, failure.SandboxOutputPublishStale when it
// holds neither the input nor the result, else a push with
// --force-with-lease on the observed commit between two AssertCurrent
// calls. A failing ls-remote or push (a rejection, a lease lost to a
// concurrent update, an unreachable remote) is
// failure.SandboxOutputPublishReject.
//
// The credential reaches git only as an http.<scheme://host/>.extraHeader
// in the GIT_CONFIG_COUNT/KEY/VALUE environment, never in a URL,
// argv or message; credential helpers are disabled so no other stored
// credential is used, and the secret, its base64 form and the header are
// scrubbed from git's stderr before it reaches an error.
//
// When the AssertCurrent after the push fails, the push has happened:
// Publish returns Pushed true together with that error.
//
// Publish does not lock: the caller holds AcquireRepoLock for RepoPath
// across it, as for Prepare and ImportResult.
func Publish(ctx context.Context, git *Runner, req PublishRequest) (PublishResult, error) {
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	assertCurrent := func() error {
		if req.AssertCurrent == nil {
			return nil
		}
		return req.AssertCurrent()
	}
	if err := req.validate(); err != nil {
		return PublishResult{}, err
	}
	if err := ValidateCredential(req.Credential, now(), req.ValidateRemote); err != nil {
		return PublishResult{}, err
	}
	remote := req.Credential.RemoteURL
	if strings.HasPrefix(remote, "-") {
		return PublishResult{}, failure.New(failure.SandboxOutputPublishForbid, "publication credential refused: %s", reasonRemote)
	}
	if err := checkBranchFormat(ctx, git, req.RepoPath, req.Branch); err != nil {
		return PublishResult{}, err
	}
	if err := checkPublishPolicy(ctx, git, req.RepoPath, req.InputCommitSHA, req.ResultCommitSHA, req.Policy); err != nil {
		return PublishResult{}, err
	}
	if err := assertCurrent(); err != nil {
		return PublishResult{}, err
	}

	auth := newCredentialAuth(req.Credential)
	config := append(append([]string{}, auth.config...), publicationProtocol(remote)...)
	remoteOpts := func(timeout time.Duration) RunOpts {
		return RunOpts{Timeout: timeout, MaxOutput: 1 << 20, Env: auth.env, Config: config, Redact: auth.secrets, Code: failure.SandboxOutputPublishReject}
	}
	ref := "refs/heads/" + req.Branch
	listing, err := git.Run(ctx, req.RepoPath, remoteOpts(lsRemoteTimeout),
		"-c", "credential.helper=", "ls-remote", "--heads", remote, ref)
	if err != nil {
		return PublishResult{}, err
	}
	remoteSHA, err := parseRemoteHead(listing, ref)
	if err != nil {
		return PublishResult{}, err
	}
	args, noop, err := PushArgs(req.Branch, req.ResultCommitSHA, req.InputCommitSHA, remoteSHA, remote)
	if err != nil {
		return PublishResult{RemoteSHA: remoteSHA}, err
	}
	if err := assertCurrent(); err != nil {
		return PublishResult{RemoteSHA: remoteSHA}, err
	}
	if noop {
		return PublishResult{RemoteSHA: remoteSHA}, nil
	}
	if _, err := git.Run(ctx, req.RepoPath, remoteOpts(pushTimeout),
		append([]string{"-c", "credential.helper="}, args...)...); err != nil {
		return PublishResult{RemoteSHA: remoteSHA}, err
	}
	return PublishResult{Pushed: true, RemoteSHA: remoteSHA}, assertCurrent()
}

// validate checks what Publish needs before touching git: a missing result
// is outside the grant (forbidden); malformed ids or branch are rejected as
// PushArgs would reject them.
func (req PublishRequest) validate() error {
	switch {
	case !cleanAbs(req.RepoPath):
		return failure.New(failure.SandboxOutputPublishForbid, "publication request: repository path must be a clean absolute path")
	case req.ResultCommitSHA == "":
		return failure.New(failure.SandboxOutputPublishForbid, "publication request: there is no result commit to publish")
	case !messages.ValidBranch(req.Branch):
		return failure.New(failure.SandboxOutputPublishForbid, "publication request: branch %q is not a valid branch name", text.Ellipsis(req.Branch, 64))
	}
	if err := req.Policy.Validate(); err != nil {
		return failure.New(failure.SandboxOutputPublishPolicy, "publication request: publish policy: %v", err)
	}
	return checkPushIDs(req.Branch, req.ResultCommitSHA, req.InputCommitSHA, "")
}

// checkBranchFormat has git confirm branch is a valid branch name that
// stands for itself.
func checkBranchFormat(ctx context.Context, git *Runner, repo, branch string) error {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: failure.SandboxOutputPublishForbid},
		"check-ref-format", "--branch", branch)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != branch {
		return failure.New(failure.SandboxOutputPublishForbid, "publication branch %q is not a plain branch name", text.Ellipsis(branch, 64))
	}
	return nil
}

// parseRemoteHead picks the object id `git ls-remote` lists for exactly
// ref ("" when absent); ls-remote patterns also match longer names ending
// in ref. A malformed or ambiguous listing is
// failure.SandboxOutputPublishReject.
func parseRemoteHead(listing, ref string) (string, error) {
	found := ""
	for _, line := range strings.Split(listing, "\n") {
		sha, name, ok := strings.Cut(line, "\t")
		if !ok || name != ref {
			continue
		}
		if !isObjectID(sha) || (found != "" && found != sha) {
			return "", failure.New(failure.SandboxOutputPublishReject, "remote listing for %s is malformed", ref)
		}
		found = sha
	}
	return found, nil
}
