package gitops

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func oid(c byte) string           { return strings.Repeat(string(c), 40) }
func oid256(c byte) string        { return strings.Repeat(string(c), 64) }
func line(id, rest string) string { return id + " " + rest + "\n" }

func TestParseObjectInventory(t *testing.T) {
	t.Parallel()
	small := Budget{MaxObjects: 2, MaxExpandedBytes: 100}
	tests := []struct {
		name    string
		in      string
		budget  Budget
		want    Inventory
		wantErr string
	}{
		{"one object", line(oid('a'), "commit 10"), Budget{}, Inventory{1, 10}, ""},
		{"no trailing newline", oid('a') + " blob 3", Budget{}, Inventory{1, 3}, ""},
		{"all types", line(oid('a'), "commit 1") + line(oid('b'), "tree 2") + line(oid('c'), "blob 3") + line(oid('d'), "tag 4"), Budget{}, Inventory{4, 10}, ""},
		{"sha256 ids", line(oid256('a'), "blob 0") + line(oid256('b'), "blob 7"), Budget{}, Inventory{2, 7}, ""},
		{"at both budgets", line(oid('a'), "blob 60") + line(oid('b'), "blob 40"), small, Inventory{2, 100}, ""},
		{"empty", "", Budget{}, Inventory{}, "no objects"},
		{"only newline", "\n", Budget{}, Inventory{}, "no objects"},
		{"too many objects", line(oid('a'), "blob 1") + line(oid('b'), "blob 1") + line(oid('c'), "blob 1"), small, Inventory{}, "object-count budget"},
		{"object over byte budget", line(oid('a'), "blob 101"), small, Inventory{}, "byte budget"},
		{"sum over byte budget", line(oid('a'), "blob 60") + line(oid('b'), "blob 41"), small, Inventory{}, "byte budget"},
		{"size overflows int64", line(oid('a'), "blob 99999999999999999999999"), Budget{}, Inventory{}, "byte budget"},
		{"over default byte budget", line(oid('a'), "blob 2147483649"), Budget{}, Inventory{}, "byte budget"},
		{"duplicate", line(oid('a'), "blob 1") + line(oid('a'), "blob 1"), Budget{}, Inventory{}, "twice"},
		{"uppercase id", line(strings.Repeat("A", 40), "blob 1"), Budget{}, Inventory{}, "malformed"},
		{"short id", line(strings.Repeat("a", 39), "blob 1"), Budget{}, Inventory{}, "malformed"},
		{"mixed hash lengths", line(oid('a'), "blob 1") + line(oid256('b'), "blob 1"), Budget{}, Inventory{}, "line 2 is malformed"},
		{"unknown type", line(oid('a'), "blobs 1"), Budget{}, Inventory{}, "malformed"},
		{"missing object", line(oid('a'), "missing"), Budget{}, Inventory{}, "malformed"},
		{"negative size", line(oid('a'), "blob -1"), Budget{}, Inventory{}, "malformed"},
		{"signed size", line(oid('a'), "blob +1"), Budget{}, Inventory{}, "malformed"},
		{"double space", oid('a') + "  blob 1\n", Budget{}, Inventory{}, "malformed"},
		{"trailing space", oid('a') + " blob 1 \n", Budget{}, Inventory{}, "malformed"},
		{"crlf", oid('a') + " blob 1\r\n", Budget{}, Inventory{}, "malformed"},
		{"blank line inside", line(oid('a'), "blob 1") + "\n" + line(oid('b'), "blob 1"), Budget{}, Inventory{}, "line 2 is malformed"},
		{"extra field", line(oid('a'), "blob 1 x"), Budget{}, Inventory{}, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseObjectInventory(tc.in, tc.budget)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, failure.Is(err, failure.SandboxOutputInvalid), "code of %v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

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
	assert.Equal(t, Budget{DefaultMaxObjects, DefaultMaxExpandedBytes, DefaultMaxCommitDepth}, Budget{}.withDefaults())
	assert.Equal(t, Budget{7, DefaultMaxExpandedBytes, 9}, Budget{MaxObjects: 7, MaxCommitDepth: 9}.withDefaults())
	assert.Equal(t, int64(2<<30), int64(DefaultMaxExpandedBytes))
}
