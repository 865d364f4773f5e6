package actors

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The collect step lets go of the discarded workspace once the worker has
// exited, whether the output's copy succeeds or not.
func TestCollectStepDropsTheWorkspace(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.fail["copyout"] = errors.New("engine gone")
	dropped := 0
	done := collectStep(context.Background(), collectInput{docker: host, workDir: t.TempDir(), containerID: fakeContainerID,
		dropWorkspace: func(context.Context) error { dropped++; return nil }})
	require.Error(t, done.err)
	assert.Equal(t, 1, dropped, "dropped once")
}
