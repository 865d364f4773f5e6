package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// Without a configured worker, forged-worker beside the running
// executable is the one; the digest is the binary's own sha256; a
// dynamically linked binary is refused.
func TestResolveWorkerBinary(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	_, _, err = resolveWorkerBinary("")
	require.Error(t, err, "no forged-worker lies beside the test binary")
	assert.Contains(t, err.Error(), filepath.Join(filepath.Dir(self), "forged-worker"))

	worker := workerbin.Path(t)
	path, digest, err := resolveWorkerBinary(worker)
	require.NoError(t, err)
	assert.Equal(t, worker, path)
	raw, err := os.ReadFile(worker)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	assert.Equal(t, hex.EncodeToString(sum[:]), digest)

	if _, err := os.Stat("/bin/ls"); err == nil {
		_, _, err = resolveWorkerBinary("/bin/ls")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "dynamically linked")
	}
}
