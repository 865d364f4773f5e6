// Command forged-worker is the program forged puts into every sandbox
// image, at messages.WorkerBinaryPath: the container's entrypoint
// (`forged-worker worker`), the lease update the host runs with docker exec
// (`worker lease-update`) and the readiness probe of a probe container
// (`worker probe`). Its logic lives in internal/worker (worker.Command).
//
// It is a small static binary apart from the daemon, built reproducibly
// (CGO_ENABLED=0 go build -trimpath -buildvcs=false, nothing stamped), so
// its sha256, which the sandbox image key holds, changes only when the
// worker's own code does: upgrading the daemon keeps every cached image.
// It imports no Docker client, no cobra and no actor system
// (TestWorkerDependencies).
package main

import (
	"os"

	"github.com/forgedev/forged/internal/worker"
)

func main() {
	os.Exit(worker.Command(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
