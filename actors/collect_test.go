package actors

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The collect step lets go of the discarded workspace while it copies the
// output out, and returns only once that is done, failure or not.
func TestCollectStepDropsTheWorkspace(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.fail["copyout"] = errors.New("engine gone")
	dropped := 0
	done := collectStep(context.Background(), collectInput{docker: host, workDir: t.TempDir(), containerID: fakeContainerID,
		dropWorkspace: func(context.Context) error { dropped++; return nil }})
	require.Error(t, done.err)
	assert.Equal(t, 1, dropped, "dropped before the step returned")
}
