package runner_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// TestAFailedStartReleasesWhatItOpened: a New that fails after it took the
// Docker context lock (here: no engine answers) releases it through the
// release path Close uses, so the next start is not refused.
func TestAFailedStartReleasesWhatItOpened(t *testing.T) {
	worker := enginetest.ForgedBinary(t)
	host := "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
	t.Setenv("DOCKER_HOST", host)
	t.Setenv("DOCKER_CONTEXT", "")
	lockRoot := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 { // the second start would be refused by a lock left held
		r, err := runner.New(ctx, runner.Config{StateRoot: t.TempDir(), LockRoot: lockRoot, WorkerBinary: worker})
		require.Error(t, err)
		assert.Nil(t, r)
		assert.Equal(t, failure.DockerUnreachable, failure.CodeOf(err), "%v", err)
	}
	lock, err := preflight.AcquireContextLock(lockRoot, host)
	require.NoError(t, err, "the failed start left the context lock held")
	require.NoError(t, lock.Release())
}
