package dockerops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/failure"
)

// runAPI is the part of the engine API that runs the worker attached.
type runAPI interface {
	ContainerAttach(ctx context.Context, container string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerWait(ctx context.Context, container string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
}

// RunLimits bounds one attached run. Zero fields take the defaults.
type RunLimits struct {
	MaxStdoutBytes  int64         // total stdout captured; default 8 MiB
	MaxLineBytes    int           // one stdout line; default 1 MiB
	MaxStderrBytes  int64         // total stderr accepted; default 8 MiB
	StderrTailBytes int           // stderr kept for diagnostics; default 64 KiB
	MaxDuration     time.Duration // whole run; default 8h
	StopGrace       time.Duration // SIGTERM-to-SIGKILL when forged stops the run; default 5s
}

func (l RunLimits) withDefaults() RunLimits {
	if l.MaxStdoutBytes <= 0 {
		l.MaxStdoutBytes = 8 << 20
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = 1 << 20
	}
	if l.MaxStderrBytes <= 0 {
		l.MaxStderrBytes = 8 << 20
	}
	if l.StderrTailBytes <= 0 {
		l.StderrTailBytes = 64 << 10
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = 8 * time.Hour
	}
	if l.StopGrace <= 0 {
		l.StopGrace = 5 * time.Second
	}
	return l
}

// RunResult is the outcome of an attached run. ExitCode is -1 when the
// exit status is unknown.
type RunResult struct {
	ExitCode        int
	Stderr          string // bounded tail of the worker's stderr
	OutputTruncated bool   // the run was stopped for exceeding an output bound
}

// RunAttached runs a created worker container attached: it attaches stdin,
// stdout and stderr before starting it, writes stdin and closes it, hands
// every stdout line to onStdoutLine (called from one goroutine; the slice
// is the callee's), keeps a bounded stderr tail and, once the output ends,
// waits for the exit code.
//
// The run is stopped (ContainerStop with limits.StopGrace, on a context
// detached from ctx) when ctx ends (ctx.Err() is returned), when
// onStdoutLine fails (its error is returned), when an output bound is
// exceeded (OutputTruncated, failure.SandboxLogLimit) or when
// limits.MaxDuration passes. Every goroutine RunAttached starts has ended
// when it returns.
func (c *Client) RunAttached(ctx context.Context, containerID string, stdin []byte, onStdoutLine func(line []byte) error, limits RunLimits) (RunResult, error) {
	limits = limits.withDefaults()
	result := RunResult{ExitCode: -1}
	if onStdoutLine == nil {
		onStdoutLine = func([]byte) error { return nil }
	}
	runCtx, cancelRun := context.WithTimeout(ctx, limits.MaxDuration)
	defer cancelRun()

	hijack, err := call(runCtx, c, c.opts.Timeouts.Attach, streamCall, func(ctx context.Context) (types.HijackedResponse, error) {
		return c.runner.ContainerAttach(ctx, containerID, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	})
	if err != nil {
		return result, c.runError(ctx, runCtx, limits, opError(ctx, failure.SandboxWorkerFailed, err, "container attach %s", shortID(containerID)))
	}
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(hijack.Close) }
	var wg sync.WaitGroup
	defer func() {
		closeConn()
		wg.Wait()
	}()

	err = callErr(runCtx, c, c.opts.Timeouts.Start, writeCall, func(ctx context.Context) error {
		return c.runner.ContainerStart(ctx, containerID, container.StartOptions{})
	})
	if err != nil {
		closeConn()
		err = opError(ctx, failure.SandboxWorkerFailed, err, "container start %s", shortID(containerID))
		// The start may have happened unheard (a deadline, a dropped
		// answer): make sure nothing runs unattended.
		return result, c.runError(ctx, runCtx, limits, err, containerID)
	}

	stdout := &lineWriter{onLine: onStdoutLine, maxLine: limits.MaxLineBytes, maxTotal: limits.MaxStdoutBytes}
	stderr := &tailWriter{keep: limits.StderrTailBytes, maxTotal: limits.MaxStderrBytes}
	copied := make(chan error, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if len(stdin) > 0 {
			if _, err := hijack.Conn.Write(stdin); err != nil {
				return // the worker stopped reading; its exit tells the rest
			}
		}
		_ = hijack.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		_, err := stdcopy.StdCopy(stdout, stderr, hijack.Reader)
		if err == nil {
			err = stdout.flush()
		}
		copied <- err
	}()

	select {
	case err = <-copied:
	case <-runCtx.Done():
		closeConn()
		<-copied
		err = runCtx.Err()
	}
	result.Stderr = stderr.String()
	return c.streamEnded(ctx, runCtx, containerID, limits, result, err, closeConn, "container attach stream")
}

// streamEnded turns the end of a worker's output stream (err from the
// copy: nil when it closed, an output limit, a failing callback, or the
// end of runCtx) into RunAttached's and Reattach's result: the exit code,
// or the container stopped and the error; what names the stream in an
// engine error.
func (c *Client) streamEnded(ctx, runCtx context.Context, containerID string, limits RunLimits, result RunResult, err error, closeConn func(), what string) (RunResult, error) {
	var limitErr *outputLimitError
	var cbErr *callbackError
	switch {
	case err == nil:
		return c.finishRun(ctx, runCtx, containerID, limits, result)
	case errors.As(err, &limitErr):
		result.OutputTruncated = true
		closeConn() // nobody reads the rest: do not let the engine block on it
		c.stopContainer(ctx, containerID, limits.StopGrace)
		result.ExitCode = c.exitCodeAfterStop(ctx, containerID)
		return result, failure.New(failure.SandboxLogLimit, "%s; the worker was stopped", limitErr.msg)
	case errors.As(err, &cbErr):
		closeConn()
		c.stopContainer(ctx, containerID, limits.StopGrace)
		return result, cbErr.err
	default:
		if runCtx.Err() == nil && engineAway(err) {
			// The engine went away mid-stream: the worker may run on.
			return result, engineAwayRun(containerID, fmt.Errorf("%s: %w", what, err))
		}
		if runCtx.Err() == nil {
			err = fmt.Errorf("%s %s: %w", what, shortID(containerID), err)
		}
		return result, c.runError(ctx, runCtx, limits, err, containerID)
	}
}

// finishRun waits for the exit code after the output stream closed.
func (c *Client) finishRun(ctx, runCtx context.Context, containerID string, limits RunLimits, result RunResult) (RunResult, error) {
	code, err := c.waitExit(runCtx, containerID, c.opts.Timeouts.Wait)
	if err == nil {
		result.ExitCode = code
		return result, nil
	}
	if runCtx.Err() != nil {
		return result, c.runError(ctx, runCtx, limits, err, containerID)
	}
	if engineAway(err) {
		// The output closed because dockerd went away (it stopped or
		// restarts): whether the worker runs on is known once it answers.
		return result, engineAwayRun(containerID, err)
	}
	// The output closed but the container did not exit: stop it.
	c.stopContainer(ctx, containerID, limits.StopGrace)
	result.ExitCode = c.exitCodeAfterStop(ctx, containerID)
	return result, opError(ctx, failure.SandboxWorkerFailed, err, "container wait %s", shortID(containerID))
}

// runError stops the container (when one is named) and turns the end of
// ctx or of the run deadline into the error RunAttached returns.
func (c *Client) runError(ctx, runCtx context.Context, limits RunLimits, err error, containerID ...string) error {
	for _, id := range containerID {
		c.stopContainer(ctx, id, limits.StopGrace)
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case runCtx.Err() != nil:
		return fmt.Errorf("container run exceeded %s: %w", limits.MaxDuration, context.DeadlineExceeded)
	}
	return err
}

// waitExit waits until the container is not running and returns its exit
// code. It always collects the engine client's wait goroutine.
func (c *Client) waitExit(ctx context.Context, containerID string, timeout time.Duration) (int, error) {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resultC, errC := c.runner.ContainerWait(waitCtx, containerID, container.WaitConditionNotRunning)
	select {
	case res := <-resultC:
		if res.Error != nil && res.Error.Message != "" {
			return int(res.StatusCode), fmt.Errorf("container wait: %s", res.Error.Message)
		}
		if res.StatusCode > math.MaxInt32 || res.StatusCode < math.MinInt32 {
			return -1, fmt.Errorf("container wait: exit status %d out of range", res.StatusCode)
		}
		return int(res.StatusCode), nil
	case err := <-errC:
		return -1, err
	}
}

// exitCodeAfterStop returns the exit code of a container forged just
// stopped, or -1.
func (c *Client) exitCodeAfterStop(ctx context.Context, containerID string) int {
	code, err := c.waitExit(context.WithoutCancel(ctx), containerID, c.opts.Timeouts.Wait)
	if err != nil {
		return -1
	}
	return code
}

// stopContainer stops a container on a context detached from ctx's
// cancellation, so that cancelling an attempt still stops its worker.
// Errors are ignored: a container that cannot be stopped is removed by
// teardown.
func (c *Client) stopContainer(ctx context.Context, containerID string, grace time.Duration) {
	seconds := int(math.Ceil(grace.Seconds()))
	_ = callErr(context.WithoutCancel(ctx), c, grace+c.opts.Timeouts.Stop, writeCall, func(ctx context.Context) error {
		err := c.runner.ContainerStop(ctx, containerID, container.StopOptions{Timeout: &seconds})
		if cerrdefs.IsNotFound(err) || cerrdefs.IsNotModified(err) {
			return nil
		}
		return err
	})
}
