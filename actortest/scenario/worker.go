package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/internal/worker"
	"github.com/forgedev/forged/messages"
)

// WorkerProgram runs the real worker (worker.Main) as a container's
// program: its start packet on stdin, its events on stdout, its paths
// mapped into the container's volumes and directories, its environment the
// container's. The task runs on the host, in the workspace directory.
func WorkerProgram(ctx context.Context, p *fakeengine.Process) int {
	cfg := worker.DefaultConfig()
	cfg.WorkspaceDir = p.Path(messages.WorkspaceDir)
	cfg.InputBundlePath = p.Path(messages.InputBundlePath)
	cfg.OutputDir = p.Path(messages.OutputDir)
	cfg.LeaseUpdatePath = p.Path(messages.LeaseUpdatePath)
	cfg.Released = p.Signals
	// The image's tmpfs directories (/run/forge, /tmp, HOME) exist in a
	// real container.
	for _, dir := range []string{filepath.Dir(cfg.LeaseUpdatePath), p.Path("/tmp"), p.Path("/home/forge")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 1
		}
	}
	cfg.HomeDir = p.Path("/home/forge")
	cfg.TempDir = p.Path("/tmp")
	cfg.Environ = slices.Clone(p.Container.Config().Env)
	return worker.Main(ctx, mapPacket(p), p.Stdout, p.Stderr, cfg)
}

// mapPacket maps the start packet's working directory (a container path)
// to the host, as the container's mounts would: the worker checks that it
// lies inside its workspace. A packet that does not decode is passed on
// unchanged, for the worker to refuse.
func mapPacket(p *fakeengine.Process) io.Reader {
	raw, err := io.ReadAll(io.LimitReader(p.Stdin, worker.MaxStartPacketBytes+1))
	if err != nil {
		return bytes.NewReader(raw)
	}
	var pkt messages.StartPacket
	if json.Unmarshal(raw, &pkt) != nil || !path.IsAbs(pkt.WorkingDirectory) {
		return bytes.NewReader(raw)
	}
	pkt.WorkingDirectory = p.Path(pkt.WorkingDirectory)
	mapped, err := json.Marshal(pkt)
	if err != nil {
		return bytes.NewReader(raw)
	}
	return bytes.NewReader(mapped)
}

// workerCommand reports whether cmd is "/opt/forge/forged worker <sub>".
func workerCommand(sub string) func(cmd []string) bool {
	return func(cmd []string) bool {
		return len(cmd) == 3 && cmd[0] == messages.WorkerBinaryPath && cmd[1] == "worker" && cmd[2] == sub
	}
}

// LeaseUpdateProgram is the exec program of `forged worker lease-update`
// (worker.WriteLeaseUpdateFile into the container).
func LeaseUpdateProgram(_ context.Context, p *fakeengine.Process) int {
	if err := worker.WriteLeaseUpdateFile(p.Stdin, p.Path(messages.LeaseUpdatePath)); err != nil {
		_, _ = p.Stderr.Write([]byte(err.Error() + "\n"))
		return 1
	}
	return 0
}
