package dockerops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/failure"
)

// callKind says how safe it is to repeat an engine call.
type callKind int

const (
	// readCall changes nothing: every transient failure is retried,
	// including engine-internal (500) errors.
	readCall callKind = iota
	// writeCall changes engine state but repeating it is harmless or
	// detected (create conflicts are resolved by the caller, removing twice
	// is "not found"): connection failures, 503/429 and the per-call
	// deadline are retried, engine-internal errors are not.
	writeCall
	// streamCall opens a stream whose duplicate would interfere (attach):
	// only failures to reach the engine at all are retried.
	streamCall
	// onceCall consumes something that cannot be replayed (a caller's
	// reader): it is never retried.
	onceCall
)

// call runs fn under a per-attempt deadline (timeout; 0 means none beyond
// ctx) and retries it with bounded exponential backoff while the failure is
// transient for its kind. Permanent failures and the cancellation of ctx
// end the loop at once.
func call[T any](ctx context.Context, c *Client, timeout time.Duration, kind callKind, fn func(context.Context) (T, error)) (T, error) {
	op := func() (T, error) {
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			callCtx, cancel = context.WithTimeout(ctx, timeout)
		}
		defer cancel()
		v, err := fn(callCtx)
		var permanent *backoff.PermanentError
		if err != nil && !errors.As(err, &permanent) && !retryable(ctx, err, kind) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}
	return backoff.RetryWithData(op, c.backoff(ctx))
}

// callErr is call for operations without a result.
func callErr(ctx context.Context, c *Client, timeout time.Duration, kind callKind, fn func(context.Context) error) error {
	_, err := call(ctx, c, timeout, kind, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	return err
}

func (c *Client) backoff(ctx context.Context) backoff.BackOff {
	p := c.opts.Retry
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialInterval),
		backoff.WithMaxInterval(p.MaxInterval),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
	)
	return backoff.WithContext(backoff.WithMaxRetries(exp, uint64(max(p.MaxAttempts-1, 0))), ctx)
}

// retryable reports whether err, returned by one attempt of a call made
// under parent, is worth another attempt.
func retryable(parent context.Context, err error, kind callKind) bool {
	if err == nil || parent.Err() != nil || kind == onceCall {
		// The caller's own context ended: a deadline error here is the
		// caller's deadline, never a reason to retry.
		return false
	}
	switch {
	case cerrdefs.IsNotFound(err), cerrdefs.IsInvalidArgument(err), cerrdefs.IsConflict(err),
		cerrdefs.IsAlreadyExists(err), cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err),
		cerrdefs.IsNotImplemented(err), cerrdefs.IsNotModified(err), cerrdefs.IsFailedPrecondition(err),
		cerrdefs.IsDataLoss(err), errors.Is(err, context.Canceled):
		return false
	}
	if isDialFailure(err) {
		return true
	}
	if kind == streamCall {
		return false
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// Only the per-attempt deadline can be exceeded while the parent
		// is alive: the engine was slow, try again.
		return true
	case cerrdefs.IsUnavailable(err), cerrdefs.IsResourceExhausted(err), isConnectionBroken(err):
		return true
	case cerrdefs.IsInternal(err):
		return kind == readCall
	}
	return false
}

// isDialFailure reports failures to reach the engine at all: the request
// never arrived, so repeating it is always safe.
func isDialFailure(err error) bool {
	if client.IsErrConnectionFailed(err) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// isConnectionBroken reports a connection that failed mid-request.
func isConnectionBroken(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, io.ErrUnexpectedEOF)
}

// opError prefixes err with the operation ("container create: ...") and,
// unless the caller's context ended (cancellation is not a sandbox
// failure), gives it the failure code. An empty code only prefixes.
func opError(ctx context.Context, code failure.Code, err error, format string, args ...any) error {
	op := fmt.Sprintf(format, args...)
	// A failure of the engine itself, not of the sandbox: the message
	// names it (dockerd down or restarting, or failing inside).
	switch {
	case ctx.Err() != nil:
	case engineAway(err):
		op += ": no answer from the Docker engine (is it down or restarting?)"
	case cerrdefs.IsInternal(err) || cerrdefs.IsUnavailable(err):
		op += ": the Docker engine failed"
	}
	if code == "" || ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return failure.Wrap(code, err, "%s", op)
}

// engineAway reports that the engine could not be reached or dropped the
// connection: the request got no answer from it at all.
func engineAway(err error) bool {
	return isDialFailure(err) || isConnectionBroken(err)
}
