package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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

func TestWriteFuncStreamsAndAFailedFillKeepsTheTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bundle")
	require.NoError(t, WriteFunc(path, 0o644, func(w io.Writer) error {
		for range 3 {
			if _, err := io.WriteString(w, "chunk;"); err != nil {
				return err
			}
		}
		return nil
	}))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "chunk;chunk;chunk;", string(got))

	boom := errors.New("boom")
	err = WriteFunc(path, 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "chunk;chunk;chunk;", string(got), "a failed write leaves the old content")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the temporary file is removed")
}

func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "id")
	require.NoError(t, Create(path, []byte("first"), 0o600))
	err := Create(path, []byte("second"), 0o600)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "first", string(got))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// A link at the target counts as something there, dangling or not.
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), link))
	require.ErrorIs(t, Create(link, []byte("x"), 0o600), fs.ErrExist)
	_, err = os.Stat(filepath.Join(dir, "nowhere"))
	require.ErrorIs(t, err, fs.ErrNotExist, "the link is not followed")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary file is left")
}

// Of concurrent creators exactly one wins, and every reader sees its whole
// content.
func TestCreateConcurrentlyHasOneWinner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id")
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = Create(path, []byte(fmt.Sprintf("writer %02d", i)), 0o600) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "two creators won")
			won = i
			continue
		}
		require.ErrorIs(t, err, fs.ErrExist)
	}
	require.NotEqual(t, -1, won)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("writer %02d", won), string(got))
}
