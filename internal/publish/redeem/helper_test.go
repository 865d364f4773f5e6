package redeem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// testRequest is a complete publication request.
var testRequest = messages.PublicationRequest{
	DispatchAttemptID: "11111111-1111-4111-8111-111111111111",
	ExecutionLeaseID:  "22222222-2222-4222-8222-222222222222",
	FencingToken:      "33333333-3333-4333-8333-333333333333",
	RunnerInstanceID:  "44444444-4444-4444-8444-444444444444",
	GrantID:           "0123456789abcdef0123456789abcdef",
	Branch:            "forge/task",
	ResultCommitSHA:   strings.Repeat("a", 40),
}

// answer is a credential answer for remote, expiring at expires.
func answer(remote string, expires time.Time) string {
	return fmt.Sprintf(`{"username":"x-access-token","secret":"%s","expiresAt":"%s","remoteUrl":"%s"}`,
		canary, expires.UTC().Format(time.RFC3339), remote)
}

// writeHelper writes an executable shell script under dir.
func writeHelper(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700))
	return path
}

func newTestHelper(t *testing.T, body string, timeout time.Duration) (*Helper, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := NewHelper(writeHelper(t, dir, body), timeout, RemotePolicy{})
	require.NoError(t, err)
	return h, dir
}

func TestHelperRedeemsWithTheRequestOnStdinAndAScrubbedEnvironment(t *testing.T) {
	t.Setenv("FORGED_CANARY", canary)
	t.Setenv("GITHUB_TOKEN", canary)
	dir := t.TempDir()
	expires := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	h, err := NewHelper(writeHelper(t, dir, fmt.Sprintf(`cat > %[1]s/request.json
env > %[1]s/env
pwd > %[1]s/pwd
printf '%%s %%s\n' "$0" "$#" > %[1]s/args
printf '%%s' '%[2]s'
`, dir, answer("https://github.com/acme/repo.git", expires))), time.Minute, RemotePolicy{})
	require.NoError(t, err)

	cred, err := h.Redeem(context.Background(), testRequest)
	require.NoError(t, err)
	assert.Equal(t, canary, cred.Secret)
	assert.Equal(t, "x-access-token", cred.Username)
	assert.Equal(t, "https://github.com/acme/repo.git", cred.RemoteURL)
	assert.True(t, expires.Equal(cred.ExpiresAt))

	raw, err := os.ReadFile(filepath.Join(dir, "request.json"))
	require.NoError(t, err)
	var got Request
	require.NoError(t, strictjson.Decode(raw, &got), "%s", raw)
	assert.Equal(t, NewRequest(testRequest), got)
	assert.Equal(t, testRequest.ExecutionLeaseID, got.LeaseID)

	env, err := os.ReadFile(filepath.Join(dir, "env"))
	require.NoError(t, err)
	assert.NotContains(t, string(env), canary, "the daemon's environment is not passed on")
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(line, "=")
		assert.Contains(t, []string{"PATH", "LC_ALL", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"}, name, "unexpected variable %s", name)
	}
	pwd, _ := os.ReadFile(filepath.Join(dir, "pwd"))
	assert.Equal(t, "/\n", string(pwd))
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	assert.Equal(t, h.Path+" 0\n", string(args), "executed directly, without arguments")
}

func TestHelperRefusals(t *testing.T) {
	future := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name, body, reason string
	}{
		{"fails", "echo " + canary + "; echo " + canary + " >&2; exit 3", "credential helper failed: exit status 3"},
		{"killed", "kill -KILL $$", "credential helper failed: killed by signal killed"},
		{"garbage", "echo 'token: " + canary + "'", "malformed answer: not JSON"},
		{"unknown field", `printf '{"secret":"x","` + canary + `":1}'`, "malformed answer: not a JSON object of exactly"},
		{"prints too much", "while :; do echo " + canary + "; done", "credential helper printed more than 65536 bytes"},
		{"expired", "printf '%s' '" + answer("https://github.com/o/r.git", time.Now().Add(-time.Second)) + "'", "credential has expired"},
		{"remote outside the allowed hosts", "printf '%s' '" + answer("https://gitlab.com/o/r.git", future) + "'", "remote URL is not an accepted publication remote"},
		{"remote with userinfo", "printf '%s' '" + answer("https://"+canary+"@github.com/o/r.git", future) + "'", "remote URL is not an accepted publication remote"},
		{"empty secret", `printf '{"username":"u","secret":"","expiresAt":"2099-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}'`, "secret is empty"},
		{"secret with a newline", `printf '{"username":"u","secret":"a\\nb` + canary + `","expiresAt":"2099-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}'`, "holds CR, LF or NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newTestHelper(t, tc.body, time.Minute)
			_, err := h.Redeem(context.Background(), testRequest)
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid), "%v", err)
			assert.Contains(t, err.Error(), tc.reason)
			assert.NotContains(t, err.Error(), canary)
			assert.NotContains(t, fmt.Sprintf("%+v", err), canary, "not in the cause chain either")
		})
	}
}

// TestHelperTimeoutKillsTheProcessGroup runs a helper that starts a
// background child and hangs: at the timeout both die.
func TestHelperTimeoutKillsTheProcessGroup(t *testing.T) {
	h, dir := newTestHelper(t, "", 300*time.Millisecond)
	require.NoError(t, os.WriteFile(h.Path, []byte(fmt.Sprintf("#!/bin/sh\nsleep 120 &\necho $! > %s/child\nsleep 120\n", dir)), 0o700))
	started := time.Now()
	_, err := h.Redeem(context.Background(), testRequest)
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
	assert.Contains(t, err.Error(), "credential helper timed out after 300ms")
	assert.Less(t, time.Since(started), 10*time.Second)
	raw, err := os.ReadFile(filepath.Join(dir, "child"))
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !alive(child) }, 10*time.Second, 20*time.Millisecond, "the helper's child %d survived", child)
}

// TestHelperMustCloseItsOutput: a helper that answers and exits while a
// background child still holds its stdout is refused (its answer may not
// be complete), and the child dies.
func TestHelperMustCloseItsOutput(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf("sleep 120 &\necho $! > %s/child\nprintf '%%s' '%s'\n", dir, answer("https://github.com/o/r.git", time.Now().Add(time.Hour)))
	h, err := NewHelper(writeHelper(t, dir, body), time.Minute, RemotePolicy{})
	require.NoError(t, err)
	_, err = h.Redeem(context.Background(), testRequest)
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
	assert.Contains(t, err.Error(), "left its output open")
	raw, err := os.ReadFile(filepath.Join(dir, "child"))
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !alive(child) }, 10*time.Second, 20*time.Millisecond)
}

func TestHelperCancellation(t *testing.T) {
	h, _ := newTestHelper(t, "sleep 120\n", time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := h.Redeem(ctx, testRequest)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "credential helper cancelled")
}

// TestHelperLeftoverChildrenDie: a helper that answers and exits leaves
// no process of its group behind.
func TestHelperLeftoverChildrenDie(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf("sleep 120 >/dev/null 2>&1 &\necho $! > %s/child\nprintf '%%s' '%s'\n", dir, answer("https://github.com/o/r.git", time.Now().Add(time.Hour)))
	h, err := NewHelper(writeHelper(t, dir, body), time.Minute, RemotePolicy{})
	require.NoError(t, err)
	_, err = h.Redeem(context.Background(), testRequest)
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "child"))
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !alive(child) }, 10*time.Second, 20*time.Millisecond)
}

func TestNewHelperRefusesWhatItCannotRun(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o600))
	for _, path := range []string{"helper", "./helper", dir + "/../x", dir, plain, filepath.Join(dir, "absent")} {
		_, err := NewHelper(path, 0, RemotePolicy{})
		assert.Error(t, err, path)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
