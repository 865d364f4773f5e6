package dockerops

import (
	"context"

	"github.com/forgedev/forged/messages"
)

// releaseCommand is the command ReleaseWorker runs in the worker
// container (worker.WriteReleaseFile).
var releaseCommand = []string{messages.WorkerBinaryPath, "worker", "release"}

// ReleaseWorker tells a worker that waits after its output
// (StartPacket.ReleaseWaitMillis) that the host has taken its last
// reading: it runs "/opt/forge/forged worker release" in the container as
// the worker user, bounded like every exec (15s, or ctx's deadline).
func (c *Client) ReleaseWorker(ctx context.Context, containerID string) error {
	return c.writeViaExec(ctx, containerID, releaseCommand, nil)
}
