package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The host takes its last reading of the container's cgroup (peak memory,
// OOM kills, pids.max events, CPU time) after the task has finished and
// before the container exits, because the cgroup disappears with the
// container. The worker holds the container open for it: once its output
// is written and announced (output_written), it waits, bounded by the
// start packet's ReleaseWaitMillis, until the host runs
// "forged worker release" through docker exec (WriteReleaseFile). The task
// is gone by then (killStragglers); a release it planted earlier is removed
// before the wait begins, and a late or missing release only costs the
// wait.

// Bounds of the release wait.
const (
	maxReleaseWaitMillis = 60_000
	releasePoll          = 5 * time.Millisecond
)

// clearRelease removes a release left by the task, before the wait.
func clearRelease(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.RemoveAll(path)
	}
}

// awaitRelease waits until a release exists at path or wait passes, and
// reports whether the host released the worker.
func awaitRelease(path string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		if _, err := os.Lstat(path); err == nil {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(releasePoll)
	}
}

// WriteReleaseFile creates the release at path (an empty file). It is the
// body of "forged worker release", which the host runs inside the sandbox
// with docker exec once it has taken its last reading.
func WriteReleaseFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	syncDir(filepath.Dir(path))
	return nil
}

// awaitHostRelease waits for the host's release when the start packet asks
// for it (see the top of this file).
func (r *run) awaitHostRelease() {
	if r.pkt.ReleaseWaitMillis <= 0 {
		return
	}
	wait := time.Duration(r.pkt.ReleaseWaitMillis) * time.Millisecond
	if !awaitRelease(r.cfg.ReleasePath, wait) {
		r.note("the host did not release the worker within %s", wait)
	}
}
