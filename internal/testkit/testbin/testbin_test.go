package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepRemovesOnlyEndedProcessesDirectories(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"100", "200", "300", "not-a-pid", "0"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, name, "sub"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(root, name, "sub", "forged"), []byte("x"), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "400"), []byte("a file, not a directory"), 0o600))

	removed := Sweep(root, func(pid int) bool { return pid == 200 })

	assert.ElementsMatch(t, []string{"100", "300"}, removed)
	for _, kept := range []string{"200", "not-a-pid", "0", "400"} {
		_, err := os.Lstat(filepath.Join(root, kept))
		assert.NoError(t, err, "%s must be kept", kept)
	}
	for _, gone := range []string{"100", "300"} {
		_, err := os.Lstat(filepath.Join(root, gone))
		assert.True(t, os.IsNotExist(err), "%s must be removed", gone)
	}
}

func TestDirIsThisProcesssAndKeptAcrossCalls(t *testing.T) {
	first, err := Dir()
	require.NoError(t, err)
	second, err := Dir()
	require.NoError(t, err)
	assert.Equal(t, first, second)
	assert.Equal(t, strconv.Itoa(os.Getpid()), filepath.Base(first))
	info, err := os.Stat(first)
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	assert.True(t, Running(os.Getpid()))
}

func TestRunningIsFalseForAnEndedProcess(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	assert.False(t, Running(cmd.Process.Pid), "pid %d has ended", cmd.Process.Pid)
}

func TestBuildBuildsOncePerProcessIntoItsDirectory(t *testing.T) {
	first := Build(t, "stressprog", "", "-trimpath", "github.com/forgedev/forged/internal/testkit/stressprog")
	info, err := os.Stat(first)
	require.NoError(t, err)
	second := Build(t, "stressprog", "", "this would not build")
	assert.Equal(t, first, second, "the second call reuses the first build")
	dir, err := Dir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "stressprog"), first)
	again, err := os.Stat(second)
	require.NoError(t, err)
	assert.Equal(t, info.ModTime(), again.ModTime(), "built once")
}

func TestWithoutRaceDropsOnlyTheRaceFlag(t *testing.T) {
	got := WithoutRace([]string{"HOME=/root", "GOFLAGS=-mod=mod -race -trimpath", "RACE=-race"})
	assert.Equal(t, []string{"HOME=/root", "GOFLAGS=-mod=mod -trimpath", "RACE=-race"}, got)
}
