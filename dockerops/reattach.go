package dockerops

import (
	"archive/tar"
	"context"
	"io"
	"path"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/failure"
)

// reattachDrain is how long a re-attached stream may still deliver output
// after the engine reports the container stopped.
const reattachDrain = 2 * time.Second

// ReadFileOut reads one regular file of at most max bytes out of a
// container (running or stopped). Anything but a regular file (a link
// the task planted included) or a larger file is refused with code; a
// missing file is an error satisfying cerrdefs.IsNotFound.
func (c *Client) ReadFileOut(ctx context.Context, containerID, file string, max int64, code failure.Code) ([]byte, error) {
	if !path.IsAbs(file) {
		return nil, failure.New(code, "read from container: %q is not absolute", file)
	}
	streamCtx, cancel := context.WithTimeout(ctx, c.opts.Timeouts.Copy)
	defer cancel()
	rc, err := call(streamCtx, c, 0, readCall, func(ctx context.Context) (io.ReadCloser, error) {
		rc, _, err := c.copier.CopyFromContainer(ctx, containerID, file)
		return rc, err
	})
	if err != nil {
		return nil, opError(ctx, "", err, "copy %s out of container %s", file, shortID(containerID))
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		return nil, failure.Wrap(code, err, "read %s out of container %s", file, shortID(containerID))
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size > max {
		return nil, failure.New(code, "%s in container %s is not a regular file of at most %d bytes", file, shortID(containerID), max)
	}
	data, err := io.ReadAll(io.LimitReader(tr, max+1))
	if err != nil {
		return nil, failure.Wrap(code, err, "read %s out of container %s", file, shortID(containerID))
	}
	if int64(len(data)) > max {
		return nil, failure.New(code, "%s in container %s is larger than %d bytes", file, shortID(containerID), max)
	}
	return data, nil
}

// Reattach takes over a worker container another forged process started
// (RunAttached's counterpart after a restart). It attaches to its stdout
// and stderr (never stdin: the start packet was read long ago) when it
// still runs, then calls caught (which reads what the stream missed: the
// worker's event log), then hands every further stdout line to
// onStdoutLine, and once the output ends or the container stops, returns
// its exit code. A container that already exited is not attached: caught
// runs and its exit code is read. The limits, the stop on ctx's end and
// on a failing callback, and the goroutine ownership are RunAttached's.
func (c *Client) Reattach(ctx context.Context, containerID string, caught func(context.Context) error, onStdoutLine func(line []byte) error, limits RunLimits) (RunResult, error) {
	limits = limits.withDefaults()
	result := RunResult{ExitCode: -1}
	runCtx, cancelRun := context.WithTimeout(ctx, limits.MaxDuration)
	defer cancelRun()

	state, err := c.InspectState(runCtx, containerID)
	if err != nil {
		return result, err
	}
	if !state.Running {
		if err := caught(runCtx); err != nil {
			return result, err
		}
		return c.finishRun(ctx, runCtx, containerID, limits, result)
	}
	hijack, err := call(runCtx, c, c.opts.Timeouts.Attach, streamCall, func(ctx context.Context) (types.HijackedResponse, error) {
		return c.runner.ContainerAttach(ctx, containerID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	})
	if err != nil {
		return result, opError(ctx, failure.SandboxWorkerFailed, err, "container re-attach %s", shortID(containerID))
	}
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(hijack.Close) }
	waitCtx, cancelWait := context.WithCancel(runCtx)
	var wg sync.WaitGroup
	defer func() {
		closeConn()
		cancelWait()
		wg.Wait()
	}()
	// The stream is open before the log is read: every line the log
	// misses is on the stream (caught's resumed verifier drops overlap).
	if err := caught(runCtx); err != nil {
		c.stopContainer(ctx, containerID, limits.StopGrace)
		return result, err
	}

	stdout := &lineWriter{onLine: onStdoutLine, maxLine: limits.MaxLineBytes, maxTotal: limits.MaxStdoutBytes}
	stderr := &tailWriter{keep: limits.StderrTailBytes, maxTotal: limits.MaxStderrBytes}
	copied := make(chan error, 1)
	stopped := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err := stdcopy.StdCopy(stdout, stderr, hijack.Reader)
		if err == nil {
			err = stdout.flush()
		}
		copied <- err
	}()
	go func() {
		// A stream re-attached to a container that stops right then may
		// never close: the engine's own account of the stop ends it.
		defer wg.Done()
		if _, err := c.waitExit(waitCtx, containerID, limits.MaxDuration); err == nil {
			close(stopped)
		}
	}()

	select {
	case err = <-copied:
	case <-stopped:
		select {
		case err = <-copied:
		case <-time.After(reattachDrain):
			closeConn()
			<-copied
			err = nil
		}
	case <-runCtx.Done():
		closeConn()
		<-copied
		err = runCtx.Err()
	}
	result.Stderr = stderr.String()
	return c.streamEnded(ctx, runCtx, containerID, limits, result, err, closeConn, "container re-attach stream")
}

// IsNotFound reports whether err says the engine has no such object.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
