package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestParseValid(t *testing.T) {
	p, err := Parse([]byte("version: 1\nworkingDirectory: /workspace/app\ncaches:\n  - name: npm\n    mode: per_attempt\n  - name: pip\n    mode: readonly\n"))
	require.NoError(t, err)
	assert.Equal(t, "/workspace/app", p.Contract.WorkingDirectory)
	assert.Equal(t, []string{"npm"}, p.Contract.PerAttemptCaches())
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Digest)
	assert.Empty(t, p.Contract.Services)
}

func TestDigestIgnoresFormatting(t *testing.T) {
	a, err := Parse([]byte("version: 1\nworkingDirectory: /workspace\n"))
	require.NoError(t, err)
	b, err := Parse([]byte("# comment\nworkingDirectory:   /workspace\nversion: 1\n"))
	require.NoError(t, err)
	c, err := Parse([]byte("version: 1\nworkingDirectory: /workspace/x\n"))
	require.NoError(t, err)
	assert.Equal(t, a.Digest, b.Digest)
	assert.NotEqual(t, a.Digest, c.Digest)
}

func TestParseDefaultsWorkingDirectory(t *testing.T) {
	p, err := Parse([]byte("version: 1\n"))
	require.NoError(t, err)
	assert.Equal(t, "/workspace", p.Contract.WorkingDirectory)
}

func TestParseRefusesInvalid(t *testing.T) {
	cases := map[string]string{
		"empty":              "",
		"wrong version":      "version: 2\n",
		"unknown key":        "version: 1\nshell: bash\n",
		"outside workspace":  "version: 1\nworkingDirectory: /etc\n",
		"workspace prefix":   "version: 1\nworkingDirectory: /workspacefoo\n",
		"relative":           "version: 1\nworkingDirectory: workspace\n",
		"unclean":            "version: 1\nworkingDirectory: /workspace/../etc\n",
		"unknown service":    "version: 1\nservices:\n  - type: mysql\n",
		"duplicate service":  "version: 1\nservices:\n  - type: redis\n  - type: redis\n",
		"unknown cache":      "version: 1\ncaches:\n  - name: maven\n    mode: readonly\n",
		"bad cache mode":     "version: 1\ncaches:\n  - name: npm\n    mode: shared\n",
		"duplicate cache":    "version: 1\ncaches:\n  - name: npm\n    mode: readonly\n  - name: npm\n    mode: per_attempt\n",
		"two documents":      "version: 1\n---\nversion: 1\n",
		"not a mapping":      "- 1\n- 2\n",
		"service extra keys": "version: 1\nservices:\n  - type: redis\n    image: evil\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(src))
			require.Error(t, err)
			assert.Equal(t, failure.SandboxContractInvalid, failure.CodeOf(err), err.Error())
		})
	}
}

func TestParseRefusesOversized(t *testing.T) {
	src := make([]byte, MaxBytes+1)
	_, err := Parse(src)
	assert.Equal(t, failure.SandboxContractInvalid, failure.CodeOf(err))
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("version: 1\nworkingDirectory: /workspace\n"))
	f.Add([]byte("version: 1\nservices:\n  - type: redis\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse(src)
		if err == nil && p.Digest == "" {
			t.Fatal("valid contract without digest")
		}
		if err != nil && failure.CodeOf(err) != failure.SandboxContractInvalid {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}
