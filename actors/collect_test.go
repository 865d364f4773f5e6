package actors

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
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

// The collect step takes the output from the control volume's image when
// the volume store can read it, and the engine's copy when it declines or
// fails; the output is validated either way. After a read from the image
// it asks the engine what its copy would also have said: that it answers,
// and that the container is still there.
func TestCollectStepTakesTheEngineCopyOnlyWhenTheImageReadDeclines(t *testing.T) {
	for name, tc := range map[string]struct {
		copied     bool
		err        error
		inspectErr error
		engineCopy int
		inspects   int
		code       failure.Code // "" : success; "-": an error without a code
	}{
		"read from the image": {copied: true, inspects: 1},
		"declined":            {copied: false, engineCopy: 1},
		"failed":              {copied: false, err: errors.New("debugfs: boom"), engineCopy: 1},
		"container gone":      {copied: true, inspects: 1, inspectErr: fmt.Errorf("container inspect: %w", cerrdefs.ErrNotFound), code: failure.SandboxOutputMissing},
		"engine away":         {copied: true, inspects: 1, inspectErr: errors.New("container inspect: no answer from the Docker engine"), code: "-"},
	} {
		t.Run(name, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			if tc.inspectErr != nil {
				host.fail["inspect"] = tc.inspectErr
			}
			workDir := t.TempDir()
			var gotDir string
			done := collectStep(context.Background(), collectInput{docker: host, git: host, workDir: workDir, containerID: fakeContainerID,
				copyOut: func(_ context.Context, hostDir string) (bool, error) {
					gotDir = hostDir
					return tc.copied, tc.err
				}})
			assert.Equal(t, filepath.Join(workDir, "output"), gotDir)
			assert.Equal(t, tc.engineCopy, host.called("copyout"))
			assert.Equal(t, tc.inspects, host.called("inspect"))
			switch tc.code {
			case "":
				require.NoError(t, done.err)
				assert.Equal(t, 1, host.called("validate"))
			case "-":
				require.Error(t, done.err)
				assert.Empty(t, failure.CodeOf(done.err))
				assert.Zero(t, host.called("validate"))
			default:
				assert.Equal(t, tc.code, failure.CodeOf(done.err))
				assert.Zero(t, host.called("validate"))
			}
		})
	}
}
