package dockerops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

// execAPI is the part of the engine API that runs a command in a running
// container.
type execAPI interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// leaseUpdateCommand is the command WriteLeaseUpdate runs in the worker
// container: it reads the update on stdin and installs it atomically at
// messages.LeaseUpdatePath (worker.WriteLeaseUpdateFile).
var leaseUpdateCommand = []string{messages.WorkerBinaryPath, "worker", "lease-update"}

// Bounds of one exec.
const (
	// execTimeout bounds a whole exec: create, start, stdin, output and
	// the wait for its exit status. A lease renewal that cannot be pushed
	// within it is better reported than waited for.
	execTimeout = 15 * time.Second
	// execOutputKeep is how much of the command's output (stdout and
	// stderr together) is kept for the error message; the rest is read
	// and dropped.
	execOutputKeep = 4 << 10
	// execPollMin and execPollMax bound the interval between exec
	// inspections while the engine still reports the command running.
	execPollMin = 5 * time.Millisecond
	execPollMax = 100 * time.Millisecond
)

// WriteLeaseUpdate pushes an encoded lease.Update into the running worker
// container: it runs "/opt/forge/forged worker lease-update" there as the
// container's user (the attempt's sandbox user) through the Engine API (exec create, attach
// with stdin, exec inspect), writes update to its stdin, closes it and
// waits for the command to exit 0. The whole exchange is bounded by a
// deadline (15s, or ctx's if sooner).
//
// update must decode as a lease.Update (lease.DecodeUpdate); otherwise the
// engine is not called and the error carries lease.UpdateInvalid. Engine
// failures and a non-zero exit (with the command's output in the message)
// carry failure.SandboxRuntimeFailed, except when ctx ended.
func (c *Client) WriteLeaseUpdate(ctx context.Context, containerID string, update []byte) error {
	if _, err := lease.DecodeUpdate(update); err != nil {
		return err
	}
	return c.writeViaExec(ctx, containerID, leaseUpdateCommand, update)
}

// writeViaExec runs cmd in the running container as the worker user, with
// data as its whole stdin, and waits for it to exit 0.
func (c *Client) writeViaExec(ctx context.Context, containerID string, cmd []string, data []byte) error {
	api := c.execs
	if api == nil {
		return errors.New("exec: the client has no engine connection")
	}
	if len(cmd) == 0 {
		return errors.New("exec: empty command")
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	fail := func(err error, format string, args ...any) error {
		if ctx.Err() != nil && parent.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%w after %s)", err, context.DeadlineExceeded, execTimeout)
		}
		return opError(parent, failure.SandboxRuntimeFailed, err, format, args...)
	}
	what := fmt.Sprintf("exec %s in %s", text.Clip(cmd[0], 64), shortID(containerID))

	created, err := call(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) (container.ExecCreateResponse, error) {
		return api.ContainerExecCreate(ctx, containerID, container.ExecOptions{
			// No User: the command runs as the container's own, the
			// attempt's sandbox user, whose /run/forge it writes.
			Cmd:          slices.Clone(cmd),
			WorkingDir:   "/",
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
		})
	})
	if err != nil {
		return fail(err, "%s: create", what)
	}
	if created.ID == "" {
		return fail(errors.New("the engine returned no exec id"), "%s: create", what)
	}

	// Attaching starts the command: only a failure to reach the engine at
	// all may be retried.
	hijack, err := call(ctx, c, c.opts.Timeouts.Attach, streamCall, func(ctx context.Context) (types.HijackedResponse, error) {
		return api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	})
	if err != nil {
		return fail(err, "%s: start", what)
	}
	output := &headWriter{keep: execOutputKeep}
	if err := exchange(ctx, hijack, data, output); err != nil {
		return fail(err, "%s: stream", what)
	}

	code, err := c.execExitCode(ctx, api, created.ID)
	if err != nil {
		return fail(err, "%s: inspect", what)
	}
	if code != 0 {
		msg := strings.TrimSpace(output.String())
		if msg == "" {
			msg = "no output"
		}
		return fail(fmt.Errorf("exit status %d: %s", code, msg), "%s", what)
	}
	return nil
}

// exchange writes data to the exec's stdin, closes it, and reads the
// multiplexed output into out until the command closes it or ctx ends.
// The connection is closed and every goroutine has ended when it returns.
func exchange(ctx context.Context, hijack types.HijackedResponse, data []byte, out *headWriter) error {
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(hijack.Close) }
	var wg sync.WaitGroup
	defer func() {
		closeConn() // unblocks a stdin write the command never read
		wg.Wait()
	}()

	wg.Add(2)
	go func() {
		defer wg.Done()
		if len(data) > 0 {
			if _, err := hijack.Conn.Write(data); err != nil {
				return // the command stopped reading; its exit status tells
			}
		}
		_ = hijack.CloseWrite()
	}()
	copied := make(chan error, 1)
	go func() {
		defer wg.Done()
		_, err := stdcopy.StdCopy(out, out, hijack.Reader)
		copied <- err
	}()
	select {
	case err := <-copied:
		return err
	case <-ctx.Done():
		closeConn()
		<-copied
		return ctx.Err()
	}
}

// execExitCode waits until the engine reports the exec finished and
// returns its exit code. The output stream closes as the command exits,
// a moment before the engine records it: poll with a short, growing
// interval.
func (c *Client) execExitCode(ctx context.Context, api execAPI, execID string) (int, error) {
	interval := execPollMin
	for {
		info, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (container.ExecInspect, error) {
			return api.ContainerExecInspect(ctx, execID)
		})
		if err != nil {
			return -1, err
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, fmt.Errorf("exec still running: %w", ctx.Err())
		case <-t.C:
		}
		interval = min(2*interval, execPollMax)
	}
}

// headWriter keeps the first keep bytes written to it and drops the rest.
// It never fails, so that the output is always read to its end. It holds
// one byte beyond keep, which tells whether keep ends inside a rune.
type headWriter struct {
	keep int
	buf  []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	room := max(w.keep+1-len(w.buf), 0)
	w.buf = append(w.buf, p[:min(room, len(p))]...)
	return len(p), nil
}

// String is the output kept, on whole runes, with "..." when some was
// dropped.
func (w *headWriter) String() string { return text.ClipMark(string(w.buf), w.keep, "...") }
