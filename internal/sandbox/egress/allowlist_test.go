package egress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestDomainsKeepsNamesAndTurnsWildcardsIntoSquidForm(t *testing.T) {
	got, err := Domains([]string{"registry.npmjs.org", "*.pypi.org", "files.pypi.org", "*.a.pypi.org", "github.com", "github.com"})
	require.NoError(t, err)
	// files.pypi.org and *.a.pypi.org are covered by *.pypi.org; the
	// duplicate is dropped.
	assert.Equal(t, []string{".pypi.org", "github.com", "registry.npmjs.org"}, got)
}

func TestDomainsRefusesWhatIsNotAHostName(t *testing.T) {
	for _, hosts := range [][]string{
		nil,
		{"127.0.0.1"},
		{"10.1.2.3"},
		{"::1"},
		{"[::1]"},
		{"1.0x7f"},
		{"example.0x1"},
		{"example.123"},
		{"localhost"},
		{"*.com.", "a.com"},
		{"Example.com"},
		{"exa_mple.com"},
		{"*.*.example.com"},
		{"example.com:443"},
		{"-a.example.com"},
		{"a..example.com"},
		{"*."},
		{"*"},
		{"example.com/path"},
		{"ex ample.com"},
		{strings.Repeat("a", 64) + ".com"},
		{strings.Repeat("abcdefghi.", 26) + "com"},
	} {
		_, err := Domains(hosts)
		require.Error(t, err, "%q", hosts)
		assert.True(t, failure.Is(err, failure.SandboxEgressPolicyInvalid), "%q: %v", hosts, err)
	}
	many := make([]string, MaxHosts+1)
	for i := range many {
		many[i] = "example.com"
	}
	_, err := Domains(many)
	assert.True(t, failure.Is(err, failure.SandboxEgressPolicyInvalid))
}

func FuzzDomains(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com", "1.2.3.4", "a.0x1", "*.a.b", "x"} {
		f.Add(s, "github.com")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := Domains([]string{a, b})
		if err != nil {
			return
		}
		require.NotEmpty(t, got)
		for _, d := range got {
			name := strings.TrimPrefix(d, ".")
			// Whatever passes is safe to put on a squid config line:
			// one token of a lowercase host name, never an address.
			require.NoError(t, checkHostName(name), "%q", d)
			require.NotContains(t, d, " ")
			require.NotContains(t, d, "\n")
		}
	})
}
