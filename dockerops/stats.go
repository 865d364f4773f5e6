package dockerops

import (
	"context"
	"errors"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// signalAPI is what ReleaseWorker needs of the engine.
type signalAPI interface {
	ContainerKill(ctx context.Context, container, signal string) error
}

// ReleaseWorker tells a worker that waits after its output
// (StartPacket.ReleaseWaitMillis) that the host has taken its last
// reading: one kill call sending messages.ReleaseSignal, which the
// container's init forwards to the worker, bounded by the Stop timeout.
// It is not retried: a lost release only costs the worker's bounded wait.
func (c *Client) ReleaseWorker(ctx context.Context, containerID string) error {
	if c.signaller == nil {
		return errors.New("release worker: the client has no engine connection")
	}
	callCtx, cancel := context.WithTimeout(ctx, c.opts.Timeouts.Stop)
	defer cancel()
	if err := c.signaller.ContainerKill(callCtx, containerID, messages.ReleaseSignal); err != nil {
		return opError(ctx, failure.SandboxRuntimeFailed, err, "release worker %s", shortID(containerID))
	}
	return nil
}
