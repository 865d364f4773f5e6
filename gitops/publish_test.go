package gitops

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const (
	testPublishUser   = "x-access-token"
	testPublishSecret = "ghs_S3cretPublicationToken0123456789"
	testGitHubRemote  = "https://github.com/forgedev/forged.git"
)

var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// localRemote accepts absolute paths and file:// URLs, so tests can
// publish to a bare repository on disk.
func localRemote(remoteURL string) error {
	if filepath.IsAbs(remoteURL) || strings.HasPrefix(remoteURL, "file:///") {
		return nil
	}
	return errors.New("not a local remote")
}

// publishFixture is a host repository holding an input commit and a result
// commit on top of it, and an empty bare repository as the remote.
type publishFixture struct {
	repo, remote, input, result string
	assertCalls                 int
}

func newPublishFixture(t *testing.T) *publishFixture {
	t.Helper()
	repo := newRepo(t)
	input := commitFile(t, repo, "src.txt", "v1\n", "input")
	result := commitFile(t, repo, "new.txt", "agent\n", "agent work")
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitT(t, "", "init", "--quiet", "--bare", "-b", "main", remote)
	return &publishFixture{repo: repo, remote: remote, input: input, result: result}
}

func (f *publishFixture) request() PublishRequest {
	return PublishRequest{
		RepoPath:        f.repo,
		Branch:          testKey,
		InputCommitSHA:  f.input,
		ResultCommitSHA: f.result,
		Credential: Credential{
			RemoteURL: f.remote,
			Username:  testPublishUser,
			Secret:    testPublishSecret,
			ExpiresAt: testNow.Add(time.Hour),
		},
		AssertCurrent:  func() error { f.assertCalls++; return nil },
		ValidateRemote: localRemote,
		Now:            func() time.Time { return testNow },
	}
}

// setRemote points the remote's managed branch at sha (pushed from repo).
func (f *publishFixture) setRemote(t *testing.T, sha string) {
	t.Helper()
	gitT(t, f.repo, "push", "--quiet", "--force", f.remote, sha+":refs/heads/"+testKey)
}

// sibling is a commit on top of the input that is not the result.
func (f *publishFixture) sibling(t *testing.T) string {
	t.Helper()
	return gitT(t, f.repo, "commit-tree", "-p", f.input, "-m", "someone else", f.input+"^{tree}")
}

func (f *publishFixture) remoteBranch(t *testing.T) string {
	t.Helper()
	return refOf(t, f.remote, "refs/heads/"+testKey)
}

// assertNoSecret checks that neither the secret nor the encoded header
// appears in err.
func assertNoSecret(t *testing.T, err error, secret string) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, secret)
	assert.NotContains(t, msg, base64.StdEncoding.EncodeToString([]byte(testPublishUser+":"+secret)))
}

// argvLoggingGit returns a Runner whose git is a wrapper script recording
// each call's argv and credential environment before running the real git.
func argvLoggingGit(t *testing.T) (git *Runner, argvLog, envLog string) {
	t.Helper()
	dir := t.TempDir()
	argvLog, envLog = filepath.Join(dir, "argv.log"), filepath.Join(dir, "env.log")
	script := filepath.Join(dir, "git")
	writeFile(t, script, "#!/bin/sh\n"+
		"printf '%s\\n' \"$*\" >> '"+argvLog+"'\n"+
		// The credential header, wherever it is among the GIT_CONFIG_*
		// entries, as "key|value"; an empty line when there is none.
		"line=; i=0; while [ $i -lt \"${GIT_CONFIG_COUNT:-0}\" ]; do eval \"k=\\${GIT_CONFIG_KEY_$i}; v=\\${GIT_CONFIG_VALUE_$i}\"; "+
		"case \"$v\" in Authorization*) line=\"$k|$v\";; esac; i=$((i+1)); done\n"+
		"printf '%s\\n' \"$line\" >> '"+envLog+"'\n"+
		"exec git \"$@\"\n")
	require.NoError(t, os.Chmod(script, 0o755))
	git = NewRunner()
	git.GitPath = script
	return git, argvLog, envLog
}

func readLog(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

func TestPublishCreatesRemoteBranch(t *testing.T) {
	t.Parallel()
	for _, spelling := range []string{"path", "file URL"} {
		t.Run(spelling, func(t *testing.T) {
			t.Parallel()
			f := newPublishFixture(t)
			req := f.request()
			if spelling == "file URL" {
				req.Credential.RemoteURL = "file://" + f.remote
			}
			git, argvLog, envLog := argvLoggingGit(t)
			res, err := Publish(testCtx(t), git, req)
			require.NoError(t, err)
			assert.Equal(t, PublishResult{Pushed: true, RemoteSHA: ""}, res)
			assert.Equal(t, f.result, f.remoteBranch(t))
			assert.Equal(t, 3, f.assertCalls, "before ls-remote, before the push and after it")
			assert.Equal(t, f.result, refOf(t, f.repo, "refs/heads/main"), "the host repository is untouched")

			argv := readLog(t, argvLog)
			require.Len(t, argv, 3)
			assert.Equal(t, "-C "+f.repo+" check-ref-format --branch "+testKey, argv[0])
			assert.Equal(t, "-C "+f.repo+" -c credential.helper= ls-remote --heads "+req.Credential.RemoteURL+" refs/heads/"+testKey, argv[1])
			assert.Equal(t, "-C "+f.repo+" -c credential.helper= push --porcelain "+req.Credential.RemoteURL+" "+
				f.result+":refs/heads/"+testKey+" --force-with-lease=refs/heads/"+testKey+":", argv[2])
			for _, line := range argv {
				assert.NotContains(t, line, testPublishSecret)
				assert.NotContains(t, line, base64.StdEncoding.EncodeToString([]byte(testPublishUser+":"+testPublishSecret)))
			}
			header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(testPublishUser+":"+testPublishSecret))
			env := readLog(t, envLog)
			assert.Equal(t, []string{"", "http.file:///.extraHeader|" + header, "http.file:///.extraHeader|" + header}, env,
				"the credential goes only to the calls that reach the remote, through the environment")
		})
	}
}

func TestPublishFastForwardsRemoteAtInput(t *testing.T) {
	t.Parallel()
	f := newPublishFixture(t)
	f.setRemote(t, f.input)
	res, err := Publish(testCtx(t), NewRunner(), f.request())
	require.NoError(t, err)
	assert.Equal(t, PublishResult{Pushed: true, RemoteSHA: f.input}, res)
	assert.Equal(t, f.result, f.remoteBranch(t))
	assert.Equal(t, 3, f.assertCalls)
}

func TestPublishNoopWhenRemoteHasResult(t *testing.T) {
	t.Parallel()
	f := newPublishFixture(t)
	f.setRemote(t, f.result)
	res, err := Publish(testCtx(t), NewRunner(), f.request())
	require.NoError(t, err)
	assert.Equal(t, PublishResult{Pushed: false, RemoteSHA: f.result}, res)
	assert.Equal(t, f.result, f.remoteBranch(t))
	assert.Equal(t, 2, f.assertCalls, "still checked before reporting the no-op")
}

func TestPublishStaleRemote(t *testing.T) {
	t.Parallel()
	f := newPublishFixture(t)
	moved := f.sibling(t)
	f.setRemote(t, moved)
	res, err := Publish(testCtx(t), NewRunner(), f.request())
	requireCode(t, err, failure.SandboxOutputPublishStale, "moved after the sandbox input was captured")
	assert.False(t, res.Pushed)
	assert.Equal(t, moved, res.RemoteSHA)
	assert.Equal(t, moved, f.remoteBranch(t), "the remote is unchanged")
	assert.Equal(t, 1, f.assertCalls)
}

func TestPublishLeaseRefusesConcurrentUpdate(t *testing.T) {
	t.Parallel()
	for _, initial := range []string{"absent", "at input"} {
		t.Run(initial, func(t *testing.T) {
			t.Parallel()
			f := newPublishFixture(t)
			if initial == "at input" {
				f.setRemote(t, f.input)
			}
			interloper := f.sibling(t)
			req := f.request()
			req.AssertCurrent = func() error {
				f.assertCalls++
				if f.assertCalls == 2 { // after ls-remote, before the push
					f.setRemote(t, interloper)
				}
				return nil
			}
			res, err := Publish(testCtx(t), NewRunner(), req)
			requireCode(t, err, failure.SandboxOutputPublishReject, "git push")
			assert.False(t, res.Pushed)
			assert.Equal(t, interloper, f.remoteBranch(t), "the lease kept the concurrent update")
			assertNoSecret(t, err, testPublishSecret)
		})
	}
}

func TestPublishAssertCurrentFailure(t *testing.T) {
	t.Parallel()
	stale := failure.New(failure.SandboxLeaseExpired, "lease expired")
	for _, failAt := range []int{1, 2, 3} {
		t.Run(strings.Repeat("I", failAt), func(t *testing.T) {
			t.Parallel()
			f := newPublishFixture(t)
			req := f.request()
			req.AssertCurrent = func() error {
				f.assertCalls++
				if f.assertCalls == failAt {
					return stale
				}
				return nil
			}
			res, err := Publish(testCtx(t), NewRunner(), req)
			require.ErrorIs(t, err, stale, "returned as is")
			assert.Equal(t, failAt, f.assertCalls, "nothing runs after a failed check")
			if failAt < 3 {
				assert.False(t, res.Pushed)
				assert.Empty(t, f.remoteBranch(t), "nothing pushed")
				return
			}
			assert.True(t, res.Pushed, "the push happened before the final check failed")
			assert.Equal(t, f.result, f.remoteBranch(t))
		})
	}
}

func TestPublishRejectsBadRequests(t *testing.T) {
	t.Parallel()
	f := newPublishFixture(t)
	tests := []struct {
		name   string
		mutate func(*PublishRequest)
		code   failure.Code
	}{
		{"relative repository", func(r *PublishRequest) { r.RepoPath = "repo" }, failure.SandboxOutputPublishForbid},
		{"no result", func(r *PublishRequest) { r.ResultCommitSHA = "" }, failure.SandboxOutputPublishForbid},
		{"branch with dots", func(r *PublishRequest) { r.Branch = "a..b" }, failure.SandboxOutputPublishForbid},
		{"previous-branch syntax", func(r *PublishRequest) { r.Branch = "@{-1}" }, failure.SandboxOutputPublishForbid},
		{"option-like branch", func(r *PublishRequest) { r.Branch = "-f" }, failure.SandboxOutputPublishForbid},
		{"HEAD", func(r *PublishRequest) { r.Branch = "HEAD" }, failure.SandboxOutputPublishForbid},
		{"abbreviated result", func(r *PublishRequest) { r.ResultCommitSHA = f.result[:12] }, failure.SandboxOutputPublishReject},
		{"uppercase input", func(r *PublishRequest) { r.InputCommitSHA = strings.ToUpper(f.input) }, failure.SandboxOutputPublishReject},
		{"option-like remote", func(r *PublishRequest) {
			r.Credential.RemoteURL = "--upload-pack=touch /tmp/x"
			r.ValidateRemote = func(string) error { return nil }
		}, failure.SandboxOutputPublishForbid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := f.request()
			called := false
			req.AssertCurrent = func() error { called = true; return nil }
			tc.mutate(&req)
			_, err := Publish(testCtx(t), NewRunner(), req)
			requireCode(t, err, tc.code, "")
			assert.False(t, called, "refused before the attempt is consulted")
			assert.Empty(t, f.remoteBranch(t))
		})
	}
}

// credentialCases are credentials each violating one rule; the secret of
// every case is (or contains) secretMark so tests can look for it.
const secretMark = "ghp_NeverShowThisSecretValue42"

func credentialCases() []struct {
	name string
	c    Credential
} {
	good := Credential{RemoteURL: testGitHubRemote, Username: testPublishUser, Secret: secretMark, ExpiresAt: testNow.Add(time.Minute)}
	with := func(mutate func(*Credential)) Credential { c := good; mutate(&c); return c }
	remote := func(u string) Credential { return with(func(c *Credential) { c.RemoteURL = u }) }
	return []struct {
		name string
		c    Credential
	}{
		{"empty remote", remote("")},
		{"http", remote("http://github.com/forgedev/forged.git")},
		{"ssh", remote("ssh://git@github.com/forgedev/forged.git")},
		{"scp-like", remote("git@github.com:forgedev/forged.git")},
		{"local path", remote("/srv/git/forged.git")},
		{"other host", remote("https://gitlab.com/forgedev/forged.git")},
		{"lookalike host", remote("https://github.com.evil.example/forgedev/forged.git")},
		{"subdomain", remote("https://api.github.com/forgedev/forged.git")},
		{"trailing-dot host", remote("https://github.com./forgedev/forged.git")},
		{"port", remote("https://github.com:443/forgedev/forged.git")},
		{"empty port", remote("https://github.com:/forgedev/forged.git")},
		{"userinfo with secret", remote("https://x:" + secretMark + "@github.com/forgedev/forged.git")},
		{"username only", remote("https://" + secretMark + "@github.com/forgedev/forged.git")},
		{"empty userinfo", remote("https://@github.com/forgedev/forged.git")},
		{"query", remote("https://github.com/forgedev/forged.git?x=1")},
		{"empty query", remote("https://github.com/forgedev/forged.git?")},
		{"fragment", remote("https://github.com/forgedev/forged.git#main")},
		{"empty fragment", remote("https://github.com/forgedev/forged.git#")},
		{"no .git", remote("https://github.com/forgedev/forged")},
		{"one segment", remote("https://github.com/forged.git")},
		{"three segments", remote("https://github.com/a/forgedev/forged.git")},
		{"dot-dot owner", remote("https://github.com/../forged.git")},
		{"dot owner", remote("https://github.com/./forged.git")},
		{"dot segments", remote("https://github.com/x/../forgedev/forged.git")},
		{"percent escape", remote("https://github.com/forgedev/forg%65d.git")},
		{"escaped host", remote("https://%67ithub.com/forgedev/forged.git")},
		{"backslash", remote("https://github.com\\forgedev/forged.git")},
		{"trailing slash", remote("https://github.com/forgedev/forged.git/")},
		{"empty repo name", remote("https://github.com/forgedev/.git")},
		{"space", remote("https://github.com/forge dev/forged.git")},
		{"tab inside host", remote("https://git\thub.com/forgedev/forged.git")},
		{"leading space", remote(" https://github.com/forgedev/forged.git")},
		{"trailing newline", remote(testGitHubRemote + "\n")},
		{"unicode owner", remote("https://github.com/forgédev/forged.git")},
		{"fullwidth host", remote("https://ｇｉｔｈｕｂ.com/forgedev/forged.git")},
		{"empty username", with(func(c *Credential) { c.Username = "" })},
		{"long username", with(func(c *Credential) { c.Username = strings.Repeat("u", 65) })},
		{"username with colon", with(func(c *Credential) { c.Username = "a:b" })},
		{"username with dot", with(func(c *Credential) { c.Username = "a.b" })},
		{"username with long s", with(func(c *Credential) { c.Username = "ſ" })},
		{"empty secret", with(func(c *Credential) { c.Secret = "" })},
		{"secret over 16 KiB", with(func(c *Credential) {
			c.Secret = secretMark + strings.Repeat("x", MaxCredentialSecretBytes+1-len(secretMark))
		})},
		{"secret with LF", with(func(c *Credential) { c.Secret = secretMark + "\nX-Evil: 1" })},
		{"secret with CR", with(func(c *Credential) { c.Secret = secretMark + "\r" })},
		{"secret with NUL", with(func(c *Credential) { c.Secret = "\x00" + secretMark })},
		{"expired", with(func(c *Credential) { c.ExpiresAt = testNow.Add(-time.Second) })},
		{"expires now", with(func(c *Credential) { c.ExpiresAt = testNow })},
		{"no expiry", with(func(c *Credential) { c.ExpiresAt = time.Time{} })},
	}
}

func TestValidateCredentialRefusals(t *testing.T) {
	t.Parallel()
	f := newPublishFixture(t)
	for _, tc := range credentialCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCredential(tc.c, testNow, nil)
			requireCode(t, err, failure.SandboxOutputPublishForbid, "publication credential refused")
			assertNoSecret(t, err, secretMark)

			// Publish refuses it before running git or consulting the attempt.
			req := f.request()
			req.Credential = tc.c
			req.ValidateRemote = nil
			called := false
			req.AssertCurrent = func() error { called = true; return nil }
			git := NewRunner()
			git.GitPath = "/nonexistent/git"
			res, err := Publish(testCtx(t), git, req)
			requireCode(t, err, failure.SandboxOutputPublishForbid, "")
			assertNoSecret(t, err, secretMark)
			assert.False(t, called)
			assert.Equal(t, PublishResult{}, res)
		})
	}
}

func TestValidateCredentialAccepts(t *testing.T) {
	t.Parallel()
	for _, remote := range []string{
		testGitHubRemote,
		"HTTPS://GitHub.COM/forgedev/forged.git",
		"https://github.com/Forge_Dev-1/re.po.git",
		"https://github.com/forgedev/..git",
		"https://github.com/a/b.GIT.git",
	} {
		c := Credential{RemoteURL: remote, Username: testPublishUser, Secret: "s", ExpiresAt: testNow.Add(time.Nanosecond)}
		assert.NoError(t, ValidateCredential(c, testNow, nil), remote)
	}
	long := Credential{RemoteURL: testGitHubRemote, Username: strings.Repeat("A", 64),
		Secret: strings.Repeat("s", MaxCredentialSecretBytes), ExpiresAt: testNow.Add(time.Hour)}
	assert.NoError(t, ValidateCredential(long, testNow, nil), "both bounds are inclusive")
	spaced := long
	spaced.Secret = "tab\tand space are allowed"
	assert.NoError(t, ValidateCredential(spaced, testNow, nil))
}

func TestValidateCredentialUsesInjectedValidator(t *testing.T) {
	t.Parallel()
	c := Credential{RemoteURL: "/srv/remote.git", Username: "u", Secret: "s", ExpiresAt: testNow.Add(time.Hour)}
	assert.NoError(t, ValidateCredential(c, testNow, localRemote))
	refused := errors.New("validator says no to " + c.RemoteURL)
	err := ValidateCredential(c, testNow, func(string) error { return refused })
	requireCode(t, err, failure.SandboxOutputPublishForbid, "remote URL is not an accepted publication remote")
	assert.ErrorIs(t, err, refused, "kept in the chain")
	assert.NotContains(t, err.Error(), c.RemoteURL, "but not shown")
}

func TestPublishErrorsNeverCarryTheSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		remote func(f *publishFixture) string
	}{
		// git quotes the path, and so the secret, in its fatal message.
		{"secret in a missing path", func(*publishFixture) string { return "/nonexistent/" + secretMark + "/remote.git" }},
		{"unreachable host", func(*publishFixture) string { return "https://127.0.0.1:1/o/r.git" }},
		{"not a repository", func(f *publishFixture) string { return filepath.Dir(f.remote) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newPublishFixture(t)
			req := f.request()
			req.Credential.RemoteURL = tc.remote(f)
			req.Credential.Secret = secretMark
			req.ValidateRemote = func(string) error { return nil }
			_, err := Publish(testCtx(t), NewRunner(), req)
			requireCode(t, err, failure.SandboxOutputPublishReject, "git ls-remote")
			assertNoSecret(t, err, secretMark)
			t.Log(err)
		})
	}
}

// authServer is a smart-HTTP git server (git http-backend over CGI) for
// the bare repositories under root that demands basic auth.
type authServer struct {
	*httptest.Server
	mu       sync.Mutex
	seenAuth []string
	seenURLs []string
}

func newAuthServer(t *testing.T, root, wantAuth string, status int) *authServer {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	require.NoError(t, err)
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Dir:  root,
		Env: []string{
			"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=publisher",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + root,
		},
	}
	s := &authServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seenAuth = append(s.seenAuth, r.Header.Get("Authorization"))
		s.seenURLs = append(s.seenURLs, r.URL.String())
		s.mu.Unlock()
		switch {
		case status != 0:
			// A hostile server echoes the credential back; git prints the
			// body as "remote: ..." on stderr.
			auth := r.Header.Get("Authorization")
			decoded, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic "))
			http.Error(w, "echo "+auth+" decoded "+string(decoded), status)
		case r.Header.Get("Authorization") != wantAuth:
			w.Header().Set("WWW-Authenticate", `Basic realm="forge"`)
			http.Error(w, "unauthorised", http.StatusUnauthorized)
		default:
			backend.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// httpFixture serves the fixture's remote over HTTP.
func httpFixture(t *testing.T, status int) (*publishFixture, *authServer, PublishRequest) {
	t.Helper()
	f := newPublishFixture(t)
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublishUser+":"+testPublishSecret))
	srv := newAuthServer(t, filepath.Dir(f.remote), wantAuth, status)
	req := f.request()
	req.Credential.RemoteURL = srv.URL + "/" + filepath.Base(f.remote)
	req.ValidateRemote = func(u string) error {
		if strings.HasPrefix(u, srv.URL+"/") {
			return nil
		}
		return errors.New("not the test server")
	}
	return f, srv, req
}

func TestPublishOverHTTPSendsCredentialAsHeader(t *testing.T) {
	t.Parallel()
	f, srv, req := httpFixture(t, 0)
	res, err := Publish(testCtx(t), NewRunner(), req)
	require.NoError(t, err)
	assert.True(t, res.Pushed)
	assert.Equal(t, f.result, f.remoteBranch(t))

	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.NotEmpty(t, srv.seenAuth)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublishUser+":"+testPublishSecret))
	for i, got := range srv.seenAuth {
		assert.Equal(t, want, got, "request %d carries the header", i)
		assert.NotContains(t, srv.seenURLs[i], testPublishSecret)
		assert.NotContains(t, srv.seenURLs[i], testPublishUser)
	}
}

func TestPublishOverHTTPWrongSecret(t *testing.T) {
	t.Parallel()
	f, _, req := httpFixture(t, 0)
	req.Credential.Secret = secretMark
	_, err := Publish(testCtx(t), NewRunner(), req)
	requireCode(t, err, failure.SandboxOutputPublishReject, "git ls-remote")
	assertNoSecret(t, err, secretMark)
	assert.Empty(t, f.remoteBranch(t))
}

// Not parallel: it turns on every git and curl trace in the process
// environment, and the server echoes the credential into git's stderr;
// the secret must still not reach the error.
func TestPublishErrorScrubbedUnderTracing(t *testing.T) {
	for _, kv := range [][2]string{
		{"GIT_TRACE", "1"}, {"GIT_TRACE_CURL", "1"}, {"GIT_CURL_VERBOSE", "1"},
		{"GIT_TRACE_REDACT", "0"}, {"GIT_TRACE_PACKET", "1"},
	} {
		t.Setenv(kv[0], kv[1])
	}
	f, _, req := httpFixture(t, http.StatusInternalServerError)
	req.Credential.Secret = secretMark
	_, err := Publish(testCtx(t), NewRunner(), req)
	requireCode(t, err, failure.SandboxOutputPublishReject, "git ls-remote")
	assertNoSecret(t, err, secretMark)
	assert.Contains(t, err.Error(), "remote: echo Basic "+redactMark+" decoded "+testPublishUser+":"+redactMark)
	assert.Empty(t, f.remoteBranch(t))
}

func TestPushArgs(t *testing.T) {
	t.Parallel()
	in, res, other := strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40)
	args, noop, err := PushArgs("forge/task", res, in, "", "origin")
	require.NoError(t, err)
	assert.False(t, noop)
	assert.Equal(t, []string{"push", "--porcelain", "origin", res + ":refs/heads/forge/task", "--force-with-lease=refs/heads/forge/task:"}, args)

	args, noop, err = PushArgs("forge/task", res, in, in, "origin")
	require.NoError(t, err)
	assert.False(t, noop)
	assert.Equal(t, "--force-with-lease=refs/heads/forge/task:"+in, args[4])

	args, noop, err = PushArgs("forge/task", res, in, res, "origin")
	require.NoError(t, err)
	assert.True(t, noop)
	assert.Nil(t, args)

	_, _, err = PushArgs("forge/task", res, in, other, "origin")
	requireCode(t, err, failure.SandboxOutputPublishStale, "")

	for name, call := range map[string][5]string{
		"empty branch":      {"", res, in, "", "origin"},
		"bad branch":        {"a..b", res, in, "", "origin"},
		"long branch":       {strings.Repeat("b", 241), res, in, "", "origin"},
		"short result":      {"b", res[:39], in, "", "origin"},
		"uppercase input":   {"b", res, strings.ToUpper(strings.Repeat("a", 40)), "", "origin"},
		"bad remote sha":    {"b", res, in, "xyz", "origin"},
		"empty remote":      {"b", res, in, "", ""},
		"option remote":     {"b", res, in, "", "--receive-pack=evil"},
		"sha-256 malformed": {"b", strings.Repeat("a", 63), in, "", "origin"},
	} {
		_, _, err := PushArgs(call[0], call[1], call[2], call[3], call[4])
		requireCode(t, err, failure.SandboxOutputPublishReject, "")
		_ = name
	}
}

func TestParseRemoteHead(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	ref := "refs/heads/forge/task"
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{"absent", "", "", false},
		{"exact", a + "\t" + ref + "\n", a, false},
		{"longer names ignored", b + "\trefs/heads/x/" + ref + "\n" + a + "\t" + ref + "\n", a, false},
		{"only a longer name", b + "\trefs/heads/x/" + ref + "\n", "", false},
		{"malformed id", "zz\t" + ref + "\n", "", true},
		{"conflicting duplicates", a + "\t" + ref + "\n" + b + "\t" + ref + "\n", "", true},
		{"space separated is not a match", a + " " + ref + "\n", "", false},
	}
	for _, tc := range tests {
		got, err := parseRemoteHead(tc.in, ref)
		if tc.bad {
			requireCode(t, err, failure.SandboxOutputPublishReject, "")
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestExtraHeaderKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		testGitHubRemote:                         "http.https://github.com/.extraHeader",
		"HTTPS://GitHub.com/forgedev/forged.git": "http.https://github.com/.extraHeader",
		"http://127.0.0.1:8080/o/r.git":          "http.http://127.0.0.1:8080/.extraHeader",
		"/srv/remote.git":                        "http.file:///.extraHeader",
		"file:///srv/remote.git":                 "http.file:///.extraHeader",
		"git@github.com:o/r.git":                 "http.file:///.extraHeader",
	} {
		assert.Equal(t, want, extraHeaderKey(in), in)
	}
}

func TestRunnerRedactsSecrets(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	secret := "hunter2-" + strings.Repeat("Z", 20)
	_, err := NewRunner().Run(testCtx(t), repo, RunOpts{Redact: []string{"", secret}}, "rev-parse", "x"+secret)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
	assert.Contains(t, err.Error(), redactMark)
}

func TestRedactDropsCutSecret(t *testing.T) {
	t.Parallel()
	secret := "0123456789abcdefghij"
	w := &tailWriter{max: 64}
	// The secret straddles the start of the kept tail.
	_, _ = w.Write([]byte(strings.Repeat("x", 50) + secret + " tail of line\nfatal: " + secret + " denied\n"))
	got := redact(w, []string{secret})
	assert.Equal(t, "fatal: "+redactMark+" denied\n", got)
	assert.NotContains(t, got, secret[10:], "no fragment survives")

	plain := &tailWriter{max: 64}
	_, _ = plain.Write([]byte("no truncation " + secret))
	assert.Equal(t, "no truncation "+redactMark, redact(plain, []string{secret}))
	assert.Equal(t, "no truncation "+secret, redact(plain, nil))

	oneLine := &tailWriter{max: 8}
	_, _ = oneLine.Write([]byte(secret))
	assert.Empty(t, redact(oneLine, []string{secret}), "a truncated tail without a line break is dropped")
}
