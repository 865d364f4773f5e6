// Package imagesig is the image-signature hook: an operator-configured
// verification command, cosign-compatible (the image reference in, the
// exit status out), run for the upstream images a sandbox build starts
// from. forged executes it directly: no shell, two arguments, "--" and the
// reference (so that a reference starting with "-" is never an option),
// its own process group, an environment of PATH, LC_ALL=C, HOME
// and TMPDIR, a timeout, stdout and stderr discarded. Exit status 0 means
// verified; anything else, or no command configured, means unverified.
//
// Under sandbox_required every upstream image must be verified, or the
// attempt is refused with sandbox_image_signature_invalid before anything
// is built; under adoption an unverified image emits
// sandbox_image_signature_warning and the attempt carries on.
package imagesig

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/forgedev/forged/internal/kit/procgroup"
)

// DefaultTimeout bounds one verification when none is configured.
const DefaultTimeout = time.Minute

// Verifier runs the verification command. The zero value (and nil)
// verifies nothing: every image is unverified.
type Verifier struct {
	command string
	timeout time.Duration
}

// New checks that command is a clean absolute path to an executable
// regular file.
func New(command string, timeout time.Duration) (*Verifier, error) {
	if err := procgroup.CheckExecutable("image verification command", command); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Verifier{command: command, timeout: timeout}, nil
}

// ErrNotConfigured is Verify's answer without a command.
var ErrNotConfigured = errors.New("no image verification command is configured")

// Verify runs the command for ref; nil means verified. The error names
// what happened (exit status, signal, timeout), never the command's
// output.
func (v *Verifier) Verify(ctx context.Context, ref string) error {
	if v == nil || v.command == "" {
		return ErrNotConfigured
	}
	runCtx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, v.command, "--", ref)
	cmd.Env, cmd.Dir = procgroup.HelperEnv(), "/"
	err := procgroup.RunHelper(cmd)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("verification cancelled: %w", ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("verification timed out after %s", v.timeout)
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("verification killed by signal %s", ws.Signal())
		}
		return fmt.Errorf("verification failed with exit status %d", exit.ExitCode())
	default:
		return fmt.Errorf("verification command could not run: %w", err)
	}
}
