package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProbeKernelFacts(t *testing.T) {
	t.Run("both readable", func(t *testing.T) {
		proc := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(proc, "1"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "cgroup"), []byte("0::/\n"), 0o644))
		access := probeKernelFacts(proc, func() error { return nil })
		assert.True(t, access.Counters)
		assert.True(t, access.Filesystems)
		assert.Empty(t, access.Reason)
	})
	t.Run("other users' processes hidden, no ptrace", func(t *testing.T) {
		// As under ProtectProc=invisible: no /proc/1.
		access := probeKernelFacts(t.TempDir(), func() error { return errors.New("needs CAP_SYS_PTRACE (root)") })
		assert.False(t, access.Counters)
		assert.False(t, access.Filesystems)
		assert.Contains(t, access.Reason, "cgroup counters")
		assert.Contains(t, access.Reason, "sandbox file systems")
		assert.Contains(t, access.Reason, "CAP_SYS_PTRACE")
	})
	t.Run("this process", func(t *testing.T) {
		access := ProbeKernelFacts()
		if os.Geteuid() == 0 {
			assert.True(t, access.Counters, access.Reason)
			assert.True(t, access.Filesystems, access.Reason)
		} else {
			assert.False(t, access.Filesystems, "a non-root test has no CAP_SYS_PTRACE")
		}
	})
}
