package remoteurl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNormalises(t *testing.T) {
	cases := map[string]string{
		"https://github.com/acme/repo.git":        "https://github.com/acme/repo.git",
		"HTTPS://GitHub.COM:443/acme/repo.git/":   "https://github.com/acme/repo.git",
		"http://127.0.0.1:8080/r.git":             "http://127.0.0.1:8080/r.git",
		"http://localhost:80/r":                   "http://localhost/r",
		"ssh://git@example.org:22/~user/repo.git": "ssh://git@example.org/~user/repo.git",
		"ssh://git@example.org:2222/repo":         "ssh://git@example.org:2222/repo",
		"git://example.org:09418/repo":            "git://example.org/repo",
		"file:///srv/git/repo.git":                "file:///srv/git/repo.git",
		"file:///srv/git/repo.git//":              "file:///srv/git/repo.git",
		"https://[::1]:8443/r":                    "https://[::1]:8443/r",
		"https://[0:0:0:0:0:0:0:1]/r":             "https://[::1]/r",
	}
	for raw, want := range cases {
		u, err := Parse(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, want, u.String(), raw)
		again, err := Parse(u.String())
		require.NoError(t, err)
		assert.Equal(t, u, again)
	}
	a, _ := Parse("HTTPS://GitHub.COM:443/acme/repo.git/")
	b, _ := Parse("https://github.com/acme/repo.git")
	assert.Equal(t, a.Key(), b.Key(), "spellings of one remote share a mirror")
	assert.True(t, IsKey(a.Key()))
	c, _ := Parse("https://github.com/acme/other.git")
	assert.NotEqual(t, a.Key(), c.Key())
}

// TestParseRefusesHostileURLs tries what a hostile dispatch would send.
func TestParseRefusesHostileURLs(t *testing.T) {
	for _, raw := range []string{
		"",
		"-uhttps://x/y",
		"--upload-pack=touch /tmp/pwn",
		"ext::sh -c touch% /tmp/pwned",
		"ext::sh",
		"fd::17",
		"git@github.com:acme/repo.git", // scp-like
		"https://user:token@github.com/acme/repo.git",
		"https://token@github.com/acme/repo.git",
		"ssh://git:pw@example.org/repo",
		"ssh://-oProxyCommand=touch/repo",
		"ssh://-oProxyCommand=touch@host/repo",
		"https://-host/repo",
		"https://github.com/acme/repo.git?token=abc",
		"https://github.com/acme/repo.git#frag",
		"https://github.com/acme/%2e%2e/repo",
		"https://github.com/acme/../repo",
		"https://github.com/acme/./repo",
		"https://github.com//repo",
		"https://github.com",
		"https://github.com/",
		"https://github.com/a b",
		"https://github.com/a\nb",
		"https://github.com/a\\b",
		"https://github.com:99999/r",
		"https://github.com:/r",
		"https://github.com:abc/r",
		"https://exa_mple.com/r",
		"https://[::ffff:1.2.3.4]/r",
		"file://host/srv/repo",
		"file://localhost/srv/repo",
		"file:///",
		"file:relative/path",
		"file:///srv/../etc",
		"ftp://example.org/repo",
		"javascript://x/y",
		"https://ex\u00e9mple.org/r",
		"https://github.com/" + strings.Repeat("a", MaxLen),
	} {
		_, err := Parse(raw)
		assert.Error(t, err, "%q", raw)
		if err != nil {
			assert.NotContains(t, err.Error(), "token", "errors never repeat the URL")
		}
	}
}

func TestParseProtocols(t *testing.T) {
	got, err := ParseProtocols([]string{"HTTPS", " file"})
	require.NoError(t, err)
	assert.Equal(t, []string{"https", "file"}, got)
	for _, bad := range [][]string{{"ext"}, {"fd"}, {"https", "https"}, {""}} {
		_, err := ParseProtocols(bad)
		assert.Error(t, err, "%q", bad)
	}
	got, err = ParseProtocols(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// FuzzParse checks that whatever Parse accepts is normalised for good:
// the normal form parses to itself, never starts with '-', carries no
// password, query, fragment, whitespace or dot segment, and its key is
// stable.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"https://github.com/acme/repo.git", "ssh://git@h:22/r", "file:///srv/r", "git://h/r",
		"http://[::1]:80/r", "ext::sh", "-x", "https://u:p@h/r", "https://h/r?x#y", "HTTP://H:0080/A/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := Parse(raw)
		if err != nil {
			return
		}
		s := u.String()
		again, err := Parse(s)
		if err != nil {
			t.Fatalf("normal form %q of %q does not parse: %v", s, raw, err)
		}
		if again != u || again.String() != s || again.Key() != u.Key() {
			t.Fatalf("normal form %q of %q is not stable: %+v vs %+v", s, raw, again, u)
		}
		if s[0] == '-' || strings.ContainsAny(s, "?# \t\n\\%") || strings.Contains(s, "/../") || strings.Contains(s, "/./") || strings.HasSuffix(s, "/") {
			t.Fatalf("normal form %q of %q is unsafe", s, raw)
		}
		if u.User != "" && u.Scheme != SSH {
			t.Fatalf("%q keeps a user name outside ssh", raw)
		}
		if strings.Count(s, "@") > 1 || (u.User == "" && strings.Contains(strings.SplitN(s, "/", 4)[2], "@")) {
			t.Fatalf("%q keeps userinfo: %q", raw, s)
		}
		if !known(u.Scheme) || !IsKey(u.Key()) {
			t.Fatalf("%q: scheme %q, key %q", raw, u.Scheme, u.Key())
		}
	})
}
