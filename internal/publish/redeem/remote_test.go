package redeem

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
)

func TestRemotePolicyDefaultIsGitHubOnly(t *testing.T) {
	var p RemotePolicy
	for _, u := range []string{"https://github.com/o/r.git", "HTTPS://GitHub.COM/o-1/r_2.x.git"} {
		assert.NoError(t, p.Validate(u), u)
	}
	for _, u := range []string{
		"http://github.com/o/r.git", "https://github.com:443/o/r.git", "https://github.com:/o/r.git",
		"https://user@github.com/o/r.git", "https://user:pw@github.com/o/r.git", "https://gitlab.com/o/r.git",
		"https://github.com/o/r.git?", "https://github.com/o/r.git#x", "https://github.com/o/r",
		"https://github.com/o/g/r.git", "https://github.com/../r.git", "https://github.com/./r.git",
		"https://github.com/o%2fx/r.git", " https://github.com/o/r.git", "https://github.com/o/r.git\n",
		"https://github.com.evil.example/o/r.git", "https://evil.example/github.com/r.git",
		"httpſ://github.com/o/r.git", "https://[::1]/o/r.git", "https://github.com//r.git", "",
		"https://github.com", "https:/github.com/o/r.git", "ext::sh -c touch% /tmp/x",
	} {
		err := p.Validate(u)
		require.Error(t, err, u)
		assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid))
		if strings.Contains(u, "user") {
			assert.NotContains(t, err.Error(), "user", "the refusal does not quote the URL")
		}
	}
}

func TestRemotePolicyConfiguredHostsAndOwners(t *testing.T) {
	p, err := NewRemotePolicy([]string{" Git.Example.com ", "127.0.0.1:8443", ""}, []string{"acme"})
	require.NoError(t, err)
	assert.Equal(t, []string{"git.example.com", "127.0.0.1:8443"}, p.Hosts)
	for _, u := range []string{"https://git.example.com/acme/r.git", "https://127.0.0.1:8443/ACME/r.git"} {
		assert.NoError(t, p.Validate(u), u)
	}
	for _, u := range []string{
		"https://github.com/acme/r.git",          // not in the list any more
		"https://127.0.0.1/acme/r.git",           // the port is part of the entry
		"https://127.0.0.1:8444/acme/r.git",      // another port
		"https://git.example.com:443/acme/r.git", // an entry without a port admits none
		"https://localhost:8443/acme/r.git",      // the same server under another name
		"https://git.example.com/other/r.git",    // owner outside the list
		"https://git.example.coK/acme/r.git",
	} {
		assert.Error(t, p.Validate(u), u)
	}
}

func TestNewRemotePolicyRefusesBadEntries(t *testing.T) {
	for _, hosts := range [][]string{{"https://github.com"}, {"github.com/"}, {"a b"}, {"h:0"}, {"h:65536"}, {"h:08"},
		{"h:"}, {"[::1]:80"}, {"user@h"}, {"-h"}, {"h..x"}, {"*.example.com"}} {
		_, err := NewRemotePolicy(hosts, nil)
		assert.Error(t, err, "%q", hosts)
	}
	for _, owners := range [][]string{{"a/b"}, {".."}, {"."}, {"a b"}} {
		_, err := NewRemotePolicy(nil, owners)
		assert.Error(t, err, "%q", owners)
	}
	p, err := NewRemotePolicy(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, p.Hosts, "no host configured means the default")
}

// FuzzRemotePolicyDefault checks that the default policy is never looser
// than gitops.ValidateGitHubRemote and, for ASCII input, exactly as
// strict.
func FuzzRemotePolicyDefault(f *testing.F) {
	for _, seed := range []string{"https://github.com/o/r.git", "HTTPS://GITHUB.COM/O/R.GIT", "https://github.com:1/o/r.git",
		"httpſ://github.com/o/r.git", "https://github.com/../r.git", "https://x@github.com/o/r.git"} {
		f.Add(seed)
	}
	var p RemotePolicy
	f.Fuzz(func(t *testing.T, u string) {
		ours, theirs := p.Validate(u) == nil, gitops.ValidateGitHubRemote(u) == nil
		if ours && !theirs {
			t.Fatalf("the default policy accepts %q, which gitops refuses", u)
		}
		if isASCII(u) && ours != theirs {
			t.Fatalf("the default policy (%v) and gitops (%v) disagree on %q", ours, theirs, u)
		}
	})
}

// acceptedPath is the independent oracle for an accepted path.
var acceptedPath = regexp.MustCompile(`^/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\.git$`)

// FuzzRemotePolicyHosts checks every accepted remote against net/url: an
// https URL whose host is exactly an allowed entry, without userinfo,
// query or fragment, with a two-segment .git path.
func FuzzRemotePolicyHosts(f *testing.F) {
	for _, seed := range []string{"https://127.0.0.1:8443/o/r.git", "https://git.example.com/o/r.git",
		"https://127.0.0.1:8443@evil/o/r.git", "https://git.example.com:/o/r.git"} {
		f.Add(seed)
	}
	p, err := NewRemotePolicy([]string{"127.0.0.1:8443", "git.example.com"}, nil)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, u string) {
		if p.Validate(u) != nil {
			return
		}
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatalf("accepted an unparsable URL %q: %v", u, err)
		}
		host := strings.ToLower(parsed.Host)
		if strings.ToLower(parsed.Scheme) != "https" || (host != "127.0.0.1:8443" && host != "git.example.com") ||
			parsed.User != nil || parsed.RawQuery != "" || parsed.ForceQuery || parsed.Fragment != "" ||
			parsed.RawPath != "" || !acceptedPath.MatchString(parsed.Path) {
			t.Fatalf("accepted %q: %#v", u, parsed)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
