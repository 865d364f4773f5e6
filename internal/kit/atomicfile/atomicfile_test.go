package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWithModeAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "record.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	require.NoError(t, Write(path, []byte("new"), 0o600))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the mode whatever the umask")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")
}

// A hostile link planted at the destination is replaced, never followed.
func TestWriteReplacesALinkWithoutFollowingIt(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o600))
	link := filepath.Join(dir, "record.json")
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, Write(link, []byte("new"), 0o600))
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(got))
	info, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular())
}

func TestWriteOverADirectoryFailsAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "record.json")
	require.NoError(t, os.Mkdir(path, 0o700))
	require.Error(t, Write(path, []byte("new"), 0o600))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the temporary file is removed")
	assert.True(t, IsTemporary(".tmp-record.json.0011"))
	assert.False(t, IsTemporary("record.json"))
}
