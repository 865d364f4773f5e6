package gitops

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func oid(c byte) string { return strings.Repeat(string(c), 40) }

func TestParseCommitDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		budget  Budget
		want    int
		wantErr string
	}{
		{"zero", "0\n", Budget{}, 0, ""},
		{"padded", "  12 \n", Budget{}, 12, ""},
		{"at default budget", "50000\n", Budget{}, 50000, ""},
		{"at custom budget", "3", Budget{MaxCommitDepth: 3}, 3, ""},
		{"over custom budget", "4", Budget{MaxCommitDepth: 3}, 0, "commit-depth budget"},
		{"over default budget", "50001\n", Budget{}, 0, "commit-depth budget"},
		{"overflow", "999999999999999999999999999", Budget{}, 0, "commit-depth budget"},
		{"empty", "", Budget{}, 0, "malformed"},
		{"negative", "-1", Budget{}, 0, "malformed"},
		{"decimal", "1.0", Budget{}, 0, "malformed"},
		{"two numbers", "1\n2\n", Budget{}, 0, "malformed"},
		{"text", "fatal: bad revision", Budget{}, 0, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseCommitDepth(tc.in, tc.budget)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, failure.Is(err, failure.SandboxOutputInvalid))
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBudgetDefaults(t *testing.T) {
	t.Parallel()
	defaults := Budget{
		MaxObjects: DefaultMaxObjects, MaxExpandedBytes: DefaultMaxExpandedBytes, MaxCommitDepth: DefaultMaxCommitDepth,
		MaxDeltaResultBytes: DefaultMaxDeltaResultBytes, MaxWorktreeEntries: DefaultMaxWorktreeEntries, MaxWorktreeBytes: DefaultMaxWorktreeBytes,
	}
	assert.Equal(t, defaults, Budget{}.withDefaults())
	custom := defaults
	custom.MaxObjects, custom.MaxCommitDepth = 7, 9
	assert.Equal(t, custom, Budget{MaxObjects: 7, MaxCommitDepth: 9}.withDefaults())
	assert.Equal(t, 50_000, DefaultMaxCommitDepth, "the seed's depth budget")
	assert.Equal(t, int64(2<<30), int64(DefaultMaxExpandedBytes))
}
