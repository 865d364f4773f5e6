package redeem

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/testkit/testremote"
)

// bearer is the endpoint's bearer token in these tests.
const bearer = "forged-bearer-TOKEN-0123456789"

func writeToken(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(bearer+"\n"), mode))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// endpointServer answers with handler after checking the method, the
// bearer token and the request body.
func endpointServer(t *testing.T, ca *testremote.CA, handler func(w http.ResponseWriter, r *http.Request)) (string, *atomic.Int64) {
	var calls atomic.Int64
	srv := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+bearer ||
			r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		raw, err := io.ReadAll(r.Body)
		var req Request
		if err != nil || strictjson.Decode(raw, &req) != nil || req != NewRequest(testRequest) {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		handler(w, r)
	}))
	return srv.URL + "/v1/publication-grants/redeem", &calls
}

func respond(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func TestEndpointRedeemsOverVerifiedTLS(t *testing.T) {
	ca := testremote.NewCA(t)
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	url, calls := endpointServer(t, ca, respond(answer("https://github.com/acme/repo.git", expires)))
	e, err := NewEndpoint(url, writeToken(t, 0o600), ca.CertFile, time.Minute, RemotePolicy{})
	require.NoError(t, err)
	cred, err := e.Redeem(context.Background(), testRequest)
	require.NoError(t, err)
	assert.Equal(t, canary, cred.Secret)
	assert.Equal(t, "https://github.com/acme/repo.git", cred.RemoteURL)
	assert.True(t, expires.Equal(cred.ExpiresAt))
	assert.EqualValues(t, 1, calls.Load())
}

func TestEndpointRefusals(t *testing.T) {
	ca := testremote.NewCA(t)
	future := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name    string
		handler func(http.ResponseWriter, *http.Request)
		reason  string
	}{
		{"forbidden", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, canary, http.StatusForbidden) }, "endpoint answered HTTP 403"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://github.com/"+canary, http.StatusTemporaryRedirect)
		}, "endpoint answered HTTP 307"},
		{"garbage", respond("<html>" + canary + "</html>"), "malformed answer: not JSON"},
		{"oversized", respond(strings.Repeat(canary, MaxResponseBytes/len(canary)+2)), "endpoint answered more than 65536 bytes"},
		{"expired", respond(answer("https://github.com/o/r.git", time.Now().Add(-time.Minute))), "credential has expired"},
		{"remote outside the allowed hosts", respond(answer("https://127.0.0.1/o/r.git", future)), "remote URL is not an accepted publication remote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, calls := endpointServer(t, ca, tc.handler)
			e, err := NewEndpoint(url, writeToken(t, 0o600), ca.CertFile, time.Minute, RemotePolicy{})
			require.NoError(t, err)
			_, err = e.Redeem(context.Background(), testRequest)
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid), "%v", err)
			assert.Contains(t, err.Error(), tc.reason)
			assert.NotContains(t, err.Error(), canary)
			assert.NotContains(t, err.Error(), bearer)
			assert.EqualValues(t, 1, calls.Load(), "no redirect is followed")
		})
	}
}

func TestEndpointTimeout(t *testing.T) {
	ca := testremote.NewCA(t)
	release := make(chan struct{})
	defer close(release)
	url, _ := endpointServer(t, ca, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	e, err := NewEndpoint(url, writeToken(t, 0o600), ca.CertFile, 200*time.Millisecond, RemotePolicy{})
	require.NoError(t, err)
	_, err = e.Redeem(context.Background(), testRequest)
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
	assert.Contains(t, err.Error(), "timed out after 200ms")
}

func TestEndpointVerifiesTLS(t *testing.T) {
	ca, other := testremote.NewCA(t), testremote.NewCA(t)
	url, calls := endpointServer(t, ca, respond(answer("https://github.com/o/r.git", time.Now().Add(time.Hour))))
	for name, caFile := range map[string]string{"system roots": "", "another CA": other.CertFile} {
		t.Run(name, func(t *testing.T) {
			e, err := NewEndpoint(url, writeToken(t, 0o600), caFile, time.Minute, RemotePolicy{})
			require.NoError(t, err)
			_, err = e.Redeem(context.Background(), testRequest)
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
			assert.Contains(t, err.Error(), "certificate")
		})
	}
	assert.Zero(t, calls.Load(), "no request reached an unverified server")
}

func TestEndpointTokenFileRules(t *testing.T) {
	ca := testremote.NewCA(t)
	url, _ := endpointServer(t, ca, respond(answer("https://github.com/o/r.git", time.Now().Add(time.Hour))))
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o666} {
		_, err := NewEndpoint(url, writeToken(t, mode), ca.CertFile, 0, RemotePolicy{})
		assert.ErrorContains(t, err, "group and others must have no access", "%04o", mode)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	spaced := filepath.Join(t.TempDir(), "spaced")
	require.NoError(t, os.WriteFile(spaced, []byte("two words"), 0o600))
	for _, path := range []string{"", empty, spaced, t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		_, err := NewEndpoint(url, path, ca.CertFile, 0, RemotePolicy{})
		assert.Error(t, err, path)
	}

	// The file is read at every redemption: loosened later, it is refused.
	token := writeToken(t, 0o600)
	e, err := NewEndpoint(url, token, ca.CertFile, 0, RemotePolicy{})
	require.NoError(t, err)
	_, err = e.Redeem(context.Background(), testRequest)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(token, 0o644))
	_, err = e.Redeem(context.Background(), testRequest)
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
	assert.NotContains(t, err.Error(), bearer)
}

func TestNewEndpointRefusesBadURLsAndCAFiles(t *testing.T) {
	token := writeToken(t, 0o600)
	for _, u := range []string{"http://127.0.0.1/x", "https://user:pw@127.0.0.1/x", "https:///x", "https://127.0.0.1/x#f", "127.0.0.1/x", ""} {
		_, err := NewEndpoint(u, token, "", 0, RemotePolicy{})
		assert.Error(t, err, u)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, ca := range []string{notPEM, filepath.Join(t.TempDir(), "absent")} {
		_, err := NewEndpoint("https://127.0.0.1/x", token, ca, 0, RemotePolicy{})
		assert.Error(t, err, ca)
	}
}

func TestNewChoosesTheKind(t *testing.T) {
	dir := t.TempDir()
	helper := writeHelper(t, dir, "exit 1\n")
	token := writeToken(t, 0o600)

	r, validate, err := New(Config{})
	require.NoError(t, err)
	assert.Nil(t, r, "nothing configured: bridge_push is refused")
	assert.NoError(t, validate("https://github.com/o/r.git"))

	r, _, err = New(Config{HelperPath: helper, AllowedHosts: []string{"git.example.com"}})
	require.NoError(t, err)
	assert.IsType(t, &Helper{}, r)

	r, validate, err = New(Config{EndpointURL: "https://127.0.0.1/x", TokenFile: token, AllowedHosts: []string{"git.example.com"}})
	require.NoError(t, err)
	assert.IsType(t, &Endpoint{}, r)
	assert.Error(t, validate("https://github.com/o/r.git"))
	assert.NoError(t, validate("https://git.example.com/o/r.git"))

	for _, bad := range []Config{
		{HelperPath: helper, EndpointURL: "https://127.0.0.1/x", TokenFile: token},
		{HelperPath: helper, TokenFile: token},
		{TokenFile: token},
		{EndpointURL: "https://127.0.0.1/x"},
		{HelperPath: helper, AllowedHosts: []string{"bad host"}},
		{HelperPath: helper, Timeout: -time.Second},
	} {
		_, _, err := New(bad)
		assert.Error(t, err, "%+v", bad)
	}
}
