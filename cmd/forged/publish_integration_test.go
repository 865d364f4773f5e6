package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/publish/redeem"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/testremote"
	"github.com/forgedev/forged/messages"
)

const forbidden = "sandbox_output_publish_forbidden"

// syncBuffer is a bytes.Buffer safe for the daemon's output copier and the
// test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// publishRig is a `forged daemon` configured for publication, with its
// output captured.
type publishRig struct {
	*daemon
	stateRoot string
	runnerID  string
	base      string
	output    *syncBuffer
}

// startPublishDaemon starts `forged daemon -v` with extra arguments and
// environment, capturing its stdout and stderr.
func startPublishDaemon(t *testing.T, args, env []string) *publishRig {
	t.Helper()
	enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	ensureBaseImage(t)
	base := t.TempDir()
	stateRoot, lockRoot := filepath.Join(base, "state"), filepath.Join(base, "locks")
	require.NoError(t, os.MkdirAll(lockRoot, 0o700))
	runnerID, err := runner.LoadRunnerID(stateRoot)
	require.NoError(t, err)
	socket := filepath.Join(stateRoot, "forged.sock")
	cmd := exec.Command(forged, append([]string{"daemon", "-v", "--socket", socket, "--state-root", stateRoot,
		"--allow-rootful", "--host-reserved-cores", "0", "--slots", "2"}, args...)...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+lockRoot), env...)
	output := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = output, output
	require.NoError(t, cmd.Start())
	d := &daemon{t: t, cmd: cmd, socket: socket, api: client.New(socket), client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			d.kill9()
		}
	})
	require.Eventually(t, func() bool {
		res, err := d.client.Get("http://forged/v1/snapshot")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the daemon did not come up: %s", output)
	return &publishRig{daemon: d, stateRoot: stateRoot, runnerID: runnerID, base: base, output: output}
}

var baseImageOnce sync.Once

// ensureBaseImage builds the example's busybox base image if it is absent.
func ensureBaseImage(t *testing.T) {
	t.Helper()
	var err error
	baseImageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var docker *dockerops.Client
		if docker, err = dockerops.Connect(ctx, dockerops.Options{}); err != nil {
			return
		}
		defer docker.Close()
		_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	})
	require.NoError(t, err)
}

// bridgePush creates a sample repository and a bridge_push dispatch for it.
func (r *publishRig) bridgePush(t *testing.T, name string) *messages.Dispatch {
	t.Helper()
	repo := filepath.Join(r.base, "repo-"+name)
	require.NoError(t, example.CreateRepo(context.Background(), repo, example.RepoOptions{}))
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: r.runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "echo " + name + " > published.txt"}})
	require.NoError(t, err)
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: example.NewUUID(), Branch: d.Lease.WorktreeKey}
	return d
}

// get returns the body of a daemon API GET.
func (r *publishRig) get(t *testing.T, path string) string {
	t.Helper()
	res, err := r.client.Get("http://forged" + path)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(raw)
}

// watch collects, until stop is called, every /v1/inspect answer and every
// process's command line that holds one of secrets.
func (r *publishRig) watch(t *testing.T, secrets ...string) (stop func() (inspected string, argvHits []string)) {
	var inspected strings.Builder
	var hits []string
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if i%4 == 0 {
				if res, err := r.client.Get("http://forged/v1/inspect"); err == nil {
					raw, _ := io.ReadAll(res.Body)
					res.Body.Close()
					inspected.Write(raw)
				}
			}
			cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, path := range cmdlines {
				raw, err := os.ReadFile(path)
				if err != nil {
					continue
				}
				for _, s := range secrets {
					if bytes.Contains(raw, []byte(s)) {
						hits = append(hits, path+": "+strings.ReplaceAll(string(raw), "\x00", " "))
					}
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (string, []string) {
		close(done)
		<-finished
		return inspected.String(), hits
	}
}

// apiSurfaces are the daemon API's answers the secret must not appear in:
// the attempts' event streams, the cleanup reports, the snapshot and the
// inspections (those collected while the attempts ran, and one now).
func (r *publishRig) apiSurfaces(t *testing.T, attemptIDs []string, inspected string) map[string]string {
	t.Helper()
	surfaces := map[string]string{
		"cleanup reports": r.get(t, "/v1/cleanup-reports"),
		"snapshot":        r.get(t, "/v1/snapshot"),
		"inspect":         inspected + r.get(t, "/v1/inspect"),
	}
	for _, id := range attemptIDs {
		surfaces["events of "+id] = r.get(t, "/v1/attempts/"+id+"/events")
		require.Contains(t, surfaces["events of "+id], `"type":"finished"`)
	}
	return surfaces
}

// assertNothingLeaks searches the surfaces, the daemon's output (debug
// logging included) and every file of the state root (ledgers, cleanup
// reports, work directories) for the secrets.
func (r *publishRig) assertNothingLeaks(t *testing.T, surfaces map[string]string, argvHits []string, secrets ...string) {
	t.Helper()
	surfaces["daemon output"] = r.output.String()
	files := 0
	require.NoError(t, filepath.WalkDir(r.stateRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		surfaces["state file "+path] = string(raw)
		return nil
	}))
	assert.Positive(t, files, "the state root holds files")
	for name, text := range surfaces {
		for _, s := range secrets {
			assert.NotContains(t, text, s, "the secret leaked into the %s", name)
		}
	}
	assert.Empty(t, argvHits, "a secret appeared in a process's arguments")
}

func randomSecret(t *testing.T, prefix string) string {
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return prefix + hex.EncodeToString(b)
}

// remoteHead is what refs/heads/<branch> of a bare repository holds ("" if
// absent).
func remoteHead(t *testing.T, bare, branch string) string {
	out, err := exec.Command("git", "-C", bare, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// publishedEvent finds the sandbox_remote_published event's data.
func publishedEvent(t *testing.T, stream string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(stream, "\n") {
		var l struct {
			Event *messages.Event `json:"event"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Event == nil || l.Event.EventType != "sandbox_remote_published" {
			continue
		}
		require.NotNil(t, l.Event.Data)
		var data map[string]any
		require.NoError(t, json.Unmarshal([]byte(*l.Event.Data), &data))
		return data
	}
	t.Fatalf("no sandbox_remote_published event in %s", stream)
	return nil
}

// TestDaemonPublishesThroughACredentialHelper runs `forged daemon` with a
// credential helper script against a local HTTPS git remote (git
// http-backend behind a TLS server signed by a test CA, checking basic
// auth against the issued secret). One bridge_push attempt publishes its
// result; attempts whose helper fails, hangs, prints garbage, issues an
// expired credential or a remote outside the allowed hosts are refused
// with sandbox_output_publish_forbidden and leave the remote untouched.
// The secret appears nowhere: daemon output (debug logging), events,
// inspect, snapshot, cleanup reports, state files, process arguments.
func TestDaemonPublishesThroughACredentialHelper(t *testing.T) {
	engine := enginetest.Client(t)
	ca := testremote.NewCA(t)
	secret := randomSecret(t, "ghs_")
	remote := testremote.NewGitServer(t, ca, "x-access-token", secret)
	_, port, err := net.SplitHostPort(remote.Host())
	require.NoError(t, err)

	helperDir := t.TempDir()
	for _, sub := range []string{"scenarios", "requests", "env"} {
		require.NoError(t, os.Mkdir(filepath.Join(helperDir, sub), 0o700))
	}
	helper := filepath.Join(helperDir, "forge-credential-helper")
	require.NoError(t, os.WriteFile(helper, []byte(fmt.Sprintf(`#!/bin/sh
req=$(cat)
grant=$(printf '%%s' "$req" | sed -n 's/.*"grantId":"\([0-9a-f-]*\)".*/\1/p')
[ -n "$grant" ] || exit 9
printf '%%s' "$req" > %[1]s/requests/$grant.json
env > %[1]s/env/$grant
. %[1]s/scenarios/$grant
`, helperDir)), 0o700))

	credential := func(url string, expires time.Time) string {
		return fmt.Sprintf(`printf '%%s' '{"username":"x-access-token","secret":"%s","expiresAt":"%s","remoteUrl":"%s"}'`,
			secret, expires.UTC().Format(time.RFC3339), url)
	}
	hour := time.Hour
	scenarios := []struct {
		name, script, reason string
	}{
		{"published", credential(remote.URL("acme", "published"), time.Now().Add(hour)), ""},
		{"fails", "echo " + secret + " >&2; echo " + secret + "; exit 1", "credential helper failed: exit status 1"},
		{"hangs", "sleep 600", "credential helper timed out after 3s"},
		{"garbage", "echo token=" + secret, "malformed answer: not JSON"},
		{"expired", credential(remote.URL("acme", "expired"), time.Now().Add(-time.Minute)), "credential has expired"},
		{"outside", credential("https://localhost:"+port+"/acme/outside.git", time.Now().Add(hour)), "remote URL is not an accepted publication remote"},
	}
	bare := map[string]string{}
	for _, name := range []string{"published", "expired", "outside"} {
		bare[name] = remote.CreateRepo(t, "acme", name)
	}

	rig := startPublishDaemon(t, []string{"--publish-helper", helper, "--publish-allowed-hosts", remote.Host(), "--publish-timeout", "3s"},
		[]string{"GIT_SSL_CAINFO=" + ca.CertFile, "FORGED_CANARY=" + secret})
	auth := testremote.BasicAuth("x-access-token", secret)
	encoded := strings.TrimPrefix(auth, "Basic ")
	stopWatching := rig.watch(t, secret, encoded)

	dispatches := map[string]*messages.Dispatch{}
	var ids []string
	for _, sc := range scenarios {
		d := rig.bridgePush(t, sc.name)
		require.NoError(t, os.WriteFile(filepath.Join(helperDir, "scenarios", d.Sandbox.PublishGrant.GrantID), []byte(sc.script+"\n"), 0o600))
		defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
		rig.submit(d)
		dispatches[sc.name] = d
		ids = append(ids, d.AttemptID())
	}
	outcomes := map[string]*messages.AttemptOutcome{}
	for _, sc := range scenarios {
		outcomes[sc.name] = rig.outcome(dispatches[sc.name].AttemptID())
		require.NotNil(t, outcomes[sc.name], sc.name)
	}
	inspected, argvHits := stopWatching()

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			d, out := dispatches[sc.name], outcomes[sc.name]
			if sc.reason == "" {
				require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
				assert.Equal(t, out.ResultCommitSHA, out.PublishedCommitSHA)
				assert.Equal(t, out.ResultCommitSHA, remoteHead(t, bare[sc.name], d.Lease.WorktreeKey), "the remote branch is at the result commit")
				data := publishedEvent(t, rig.get(t, "/v1/attempts/"+d.AttemptID()+"/events"))
				assert.Equal(t, d.Sandbox.PublishGrant.GrantID, data["grantId"])
				assert.Equal(t, d.Sandbox.PublishGrant.Branch, data["branch"])
				assert.Equal(t, out.ResultCommitSHA, data["resultCommitSha"])

				raw, err := os.ReadFile(filepath.Join(helperDir, "requests", d.Sandbox.PublishGrant.GrantID+".json"))
				require.NoError(t, err)
				var req redeem.Request
				require.NoError(t, strictjson.Decode(raw, &req), "%s", raw)
				assert.Equal(t, redeem.Request{
					DispatchAttemptID: d.AttemptID(), LeaseID: d.Sandbox.ExecutionLeaseID, FencingToken: d.Lease.FencingToken,
					RunnerInstanceID: d.Sandbox.RunnerInstanceID, GrantID: d.Sandbox.PublishGrant.GrantID,
					Branch: d.Sandbox.PublishGrant.Branch, ResultCommitSHA: out.ResultCommitSHA,
				}, req)
				env, err := os.ReadFile(filepath.Join(helperDir, "env", d.Sandbox.PublishGrant.GrantID))
				require.NoError(t, err)
				assert.NotContains(t, string(env), "FORGED_CANARY", "the helper's environment is scrubbed")
				assert.NotContains(t, string(env), "GIT_SSL_CAINFO")
				return
			}
			assert.Equal(t, messages.StatusFailed, out.Status)
			assert.Equal(t, forbidden, out.Code)
			assert.Contains(t, out.Message, sc.reason)
			assert.Empty(t, out.PublishedCommitSHA)
			if b, ok := bare[sc.name]; ok {
				assert.Empty(t, remoteHead(t, b, d.Lease.WorktreeKey), "the remote is untouched")
			}
		})
	}
	for _, path := range remote.Paths() {
		assert.True(t, strings.HasPrefix(path, "/acme/published.git/"), "only the published attempt reached the remote: %s", path)
	}
	assert.Positive(t, remote.Requests())
	assert.Empty(t, remote.Refused(), "the issued credential authenticated every request")

	surfaces := rig.apiSurfaces(t, ids, inspected)
	rig.stop()
	rig.assertNothingLeaks(t, surfaces, argvHits, secret, encoded)
}

// TestDaemonPublishesThroughAnHTTPSEndpoint configures `forged daemon`
// through FORGED_PUBLISH_* variables only, with an HTTPS grant endpoint
// (bearer token from a 0600 file, TLS verified against the test CA). The
// attempt publishes; neither the secret nor the bearer token leaks.
func TestDaemonPublishesThroughAnHTTPSEndpoint(t *testing.T) {
	engine := enginetest.Client(t)
	ca := testremote.NewCA(t)
	secret, bearer := randomSecret(t, "ghs_"), randomSecret(t, "bearer_")
	remote := testremote.NewGitServer(t, ca, "x-access-token", secret)
	bare := remote.CreateRepo(t, "acme", "endpoint")
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(bearer+"\n"), 0o600))

	var mu sync.Mutex
	var received []redeem.Request
	endpoint := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		var req redeem.Request
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+bearer || strictjson.Decode(raw, &req) != nil {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		mu.Lock()
		received = append(received, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"username": "x-access-token", "secret": secret,
			"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "remoteUrl": remote.URL("acme", "endpoint")})
	}))

	rig := startPublishDaemon(t, nil, []string{
		"GIT_SSL_CAINFO=" + ca.CertFile,
		"FORGED_PUBLISH_ENDPOINT=" + endpoint.URL + "/grants/redeem",
		"FORGED_PUBLISH_TOKEN_FILE=" + tokenFile,
		"FORGED_PUBLISH_CA_FILE=" + ca.CertFile,
		"FORGED_PUBLISH_ALLOWED_HOSTS=github.com," + remote.Host(),
	})
	stopWatching := rig.watch(t, secret, bearer)
	d := rig.bridgePush(t, "endpoint")
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
	rig.submit(d)
	out := rig.outcome(d.AttemptID())
	inspected, argvHits := stopWatching()
	require.NotNil(t, out)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	assert.Equal(t, out.ResultCommitSHA, remoteHead(t, bare, d.Lease.WorktreeKey))
	mu.Lock()
	require.Len(t, received, 1)
	assert.Equal(t, d.Sandbox.PublishGrant.GrantID, received[0].GrantID)
	assert.Equal(t, out.ResultCommitSHA, received[0].ResultCommitSHA)
	mu.Unlock()

	surfaces := rig.apiSurfaces(t, []string{d.AttemptID()}, inspected)
	rig.stop()
	rig.assertNothingLeaks(t, surfaces, argvHits, secret, strings.TrimPrefix(testremote.BasicAuth("x-access-token", secret), "Basic "), bearer)
}

// TestRunRefusesAnInvalidPublicationConfiguration: `forged run` checks the
// publication settings before it starts anything (exit status 2), and the
// FORGED_* variable is named in the message.
func TestRunRefusesAnInvalidPublicationConfiguration(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	dir := t.TempDir()
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RepoPath: dir})
	require.NoError(t, err)
	path := filepath.Join(dir, "dispatch.json")
	require.NoError(t, example.WriteDispatch(path, d))
	loose := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(loose, []byte("token"), 0o644))
	for _, tc := range []struct {
		args, env []string
		want      string
	}{
		{[]string{"--publish-helper", "relative/helper"}, nil, "clean absolute path"},
		{[]string{"--publish-endpoint", "https://127.0.0.1/x", "--publish-token-file", loose}, nil, "group and others must have no access"},
		{nil, []string{"FORGED_PUBLISH_ALLOWED_HOSTS=https://github.com"}, "not a host name"},
		{nil, []string{"FORGED_PUBLISH_TIMEOUT=soon"}, "FORGED_PUBLISH_TIMEOUT"},
	} {
		cmd := exec.Command(forged, append(append([]string{"run", "--state-root", filepath.Join(dir, "state")}, tc.args...), path)...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		assert.Equal(t, 2, exit.ExitCode(), "%s", out)
		assert.Contains(t, string(out), tc.want)
	}
}
