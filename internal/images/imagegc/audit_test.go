package imagegc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func key(c byte) string { return strings.Repeat(string(c), 64) }

func TestSelectAuditFollowsTheSeedsRule(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(c byte, age time.Duration) AuditRecord { return AuditRecord{Key: key(c), Modified: now.Add(-age)} }
	records := []AuditRecord{rec('a', 3*time.Hour), rec('b', time.Minute), rec('c', 10*24*time.Hour), rec('d', 2*time.Hour), rec('e', 30*time.Minute)}
	keys := func(rs []AuditRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Key[:1])
		}
		return out
	}
	// Newest first: b, e, d, a, c. Keep 3: a and c go for their rank; c
	// would also go for its age.
	assert.Equal(t, []string{"a", "c"}, keys(SelectAudit(records, 3, 7*24*time.Hour, nil, now)))
	// A protected key is never a candidate and takes no rank.
	assert.Equal(t, []string{"c"}, keys(SelectAudit(records, 3, 7*24*time.Hour, map[string]bool{key('d'): true}, now)))
	// Age alone: everything older than the bound goes, even among the newest.
	assert.Equal(t, []string{"d", "a", "c"}, keys(SelectAudit(records, 10, 90*time.Minute, nil, now)))
	// The bounds hold: at least one key, at least an hour.
	assert.Equal(t, []string{"e", "d", "a", "c"}, keys(SelectAudit(records, 0, time.Second, nil, now)))
	assert.Empty(t, SelectAudit(nil, 3, time.Hour, nil, now))
}

func TestPurgeAuditRemovesOnlyItsOwnDirectories(t *testing.T) {
	state := t.TempDir()
	root := filepath.Join(state, auditDir)
	old := time.Now().Add(-30 * 24 * time.Hour)
	mk := func(name string, modified time.Time) string {
		dir := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "build.log"), []byte("log"), 0o600))
		require.NoError(t, os.Chtimes(dir, modified, modified))
		return dir
	}
	expired := mk(key('1'), old)
	inUse := mk(key('2'), old)
	fresh := mk(key('3'), time.Now())
	stray := mk("not-a-key", old)
	// A symbolic link named like a key, pointing at something forged must
	// never touch: ignored, neither followed nor removed.
	victim := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o600))
	link := filepath.Join(root, key('4'))
	require.NoError(t, os.Symlink(victim, link))

	refs := NewRefs()
	require.NoError(t, refs.Acquire(t.Context(), "attempt", key('2')))
	req := Request{Now: time.Now(), Refs: refs, DryRun: true}

	report, err := PurgeAudit(state, req)
	require.NoError(t, err)
	require.Len(t, report.Removed, 1)
	assert.Equal(t, key('1'), report.Removed[0].Key)
	assert.DirExists(t, expired, "a dry run removes nothing")

	req.DryRun = false
	report, err = PurgeAudit(state, req)
	require.NoError(t, err)
	require.Len(t, report.Removed, 1)
	assert.Equal(t, 2, report.Kept)
	assert.Empty(t, report.Failed)
	assert.NoDirExists(t, expired)
	assert.DirExists(t, inUse, "a key in use keeps its logs")
	assert.DirExists(t, fresh)
	assert.DirExists(t, stray, "a name that is not a key is not forged's")
	assert.FileExists(t, filepath.Join(victim, "precious"))
	_, err = os.Lstat(link)
	assert.NoError(t, err, "the link itself stays too")

	refs.Release("attempt")
	report, err = PurgeAudit(state, req)
	require.NoError(t, err)
	require.Len(t, report.Removed, 1, "released, its expired logs go")
	assert.NoDirExists(t, inUse)
}

func TestPurgeAuditWithoutDirectory(t *testing.T) {
	report, err := PurgeAudit(t.TempDir(), Request{Now: time.Now()})
	require.NoError(t, err)
	assert.Empty(t, report.Removed)
}
