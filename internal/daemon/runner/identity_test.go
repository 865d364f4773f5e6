package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func TestRunnerIDIsMintedOnceAndKept(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	id, err := LoadRunnerID(root)
	require.NoError(t, err)
	assert.True(t, messages.IsFullUUID(id), "%q", id)
	raw, err := os.ReadFile(filepath.Join(root, runnerIDFile))
	require.NoError(t, err)
	assert.Equal(t, id+"\n", string(raw))
	info, err := os.Stat(filepath.Join(root, runnerIDFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	again, err := LoadRunnerID(root)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only the id file is in the state root")

	require.NoError(t, os.WriteFile(filepath.Join(root, runnerIDFile), []byte("not-an-id\n"), 0o600))
	_, err = LoadRunnerID(root)
	assert.ErrorContains(t, err, "does not hold a full UUID", "an id file someone changed is refused, never replaced")
}

// Starts that race for a fresh state root agree on one id.
func TestRunnerIDConcurrentFirstStartsAgree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = LoadRunnerID(root) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, got[0], got[i])
	}
}

// runnerIDFaultRoot names, in the child process of
// TestRunnerIDSurvivesAWriteFault, the state root to mint an id in.
const runnerIDFaultRoot = "FORGED_TEST_RUNNER_ID_FAULT_ROOT"

// A start whose write of the new id fails partway (here the file-size
// limit cuts it after 16 bytes, as a full disk or a crash would) must not
// leave a torn or empty id file behind: the next start would refuse it
// and the daemon could never start again on that state root. The fault is
// injected in a child process, so that the limit binds nothing else.
func TestRunnerIDSurvivesAWriteFault(t *testing.T) {
	if root := os.Getenv(runnerIDFaultRoot); root != "" {
		limit := syscall.Rlimit{Cur: 16, Max: 16}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
			t.Fatalf("setrlimit: %v", err)
		}
		if id, err := LoadRunnerID(root); err == nil {
			t.Fatalf("the id %s was written whole despite the 16-byte limit: no fault was injected", id)
		}
		return
	}
	root := filepath.Join(t.TempDir(), "state")
	child := exec.Command(os.Args[0], "-test.run=^TestRunnerIDSurvivesAWriteFault$", "-test.count=1")
	child.Env = append(os.Environ(), runnerIDFaultRoot+"="+root)
	out, err := child.CombinedOutput()
	require.NoError(t, err, "the child start with the injected fault:\n%s", out)

	id, err := LoadRunnerID(root)
	require.NoError(t, err, "the next start after a failed write of the id")
	assert.True(t, messages.IsFullUUID(id), "%q", id)
	again, err := LoadRunnerID(root)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{runnerIDFile}, names, "no temporary file is left behind")
}
