package dockerops

import (
	"context"
	"fmt"

	"github.com/forgedev/forged/failure"
)

// EngineAwayError ends a run (RunAttached, Reattach) whose engine stopped
// answering while the worker ran: the output stream ended or broke, and
// the engine could not then say how the container ended (dockerd stopped
// or restarting). The container is left alone, not stopped: an engine
// with live-restore keeps it running across its restart, and the caller
// may Reattach once the engine answers again. It is returned wrapped in a
// *failure.Error with failure.SandboxRuntimeFailed.
type EngineAwayError struct {
	ContainerID string
	Err         error
}

func (e *EngineAwayError) Error() string {
	return fmt.Sprintf("worker %s: no answer from the Docker engine (is it down or restarting?): %v", shortID(e.ContainerID), e.Err)
}

func (e *EngineAwayError) Unwrap() error { return e.Err }

// engineAwayRun is the error of a run whose engine went away.
func engineAwayRun(containerID string, err error) error {
	return failure.Wrap(failure.SandboxRuntimeFailed, &EngineAwayError{ContainerID: containerID, Err: err}, "the worker's run lost the engine")
}

// LiveRestore reports whether the engine keeps containers running while
// dockerd is down (its live-restore setting).
func (c *Client) LiveRestore(ctx context.Context) (bool, error) {
	if c.raw == nil {
		return false, nil
	}
	info, err := call(ctx, c, c.opts.Timeouts.Ping, readCall, c.raw.Info)
	if err != nil {
		return false, opError(ctx, "", err, "docker info")
	}
	return info.LiveRestoreEnabled, nil
}
