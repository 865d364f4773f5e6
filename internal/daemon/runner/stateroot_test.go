package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStateRootIsTightenedAtStart(t *testing.T) {
	loose := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(loose, 0o755))
	require.NoError(t, os.Chmod(loose, 0o777))
	require.NoError(t, prepareStateRoot(loose))
	info, err := os.Stat(loose)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	fresh := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, prepareStateRoot(fresh))
	info, err = os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.ErrorContains(t, prepareStateRoot(file), "not a directory")

	if os.Geteuid() == 0 {
		foreign := filepath.Join(t.TempDir(), "foreign")
		require.NoError(t, os.Mkdir(foreign, 0o755))
		require.NoError(t, os.Chown(foreign, 65534, 65534))
		assert.ErrorContains(t, prepareStateRoot(foreign), "owned by uid 65534")
	}
}
