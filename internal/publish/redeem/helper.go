package redeem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/forgedev/forged/internal/kit/procgroup"
	"os/exec"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// DefaultTimeout bounds one redemption when none is configured.
const DefaultTimeout = 30 * time.Second

// Helper redeems grants by executing a credential helper program.
type Helper struct {
	// Path is the helper's absolute path. It is executed directly, with no
	// argument and no shell.
	Path string
	// Timeout bounds one run (DefaultTimeout when zero); the helper's whole
	// process group is killed when it expires or the redemption is
	// cancelled.
	Timeout time.Duration
	// Policy vets the redeemed remote.
	Policy RemotePolicy
	// Now is the clock for the credential's expiry (time.Now when nil).
	Now func() time.Time
}

// NewHelper checks that path names an executable regular file given as a
// clean absolute path.
func NewHelper(path string, timeout time.Duration, policy RemotePolicy) (*Helper, error) {
	if err := procgroup.CheckExecutable("publication helper", path); err != nil {
		return nil, err
	}
	return &Helper{Path: path, Timeout: timeout, Policy: policy}, nil
}

// Redeem runs the helper with the request on stdin and decodes its stdout
// (see ParseResponse), then validates the credential (see
// gitops.ValidateCredential) against the policy. A helper that cannot
// start, exits non-zero or by a signal, outlives the timeout or prints more
// than MaxResponseBytes is refused with failure.SandboxOutputPublishForbid;
// the reason names what happened, never what the helper printed.
func (h *Helper) Redeem(ctx context.Context, req messages.PublicationRequest) (gitops.Credential, error) {
	body, err := json.Marshal(NewRequest(req))
	if err != nil {
		return gitops.Credential{}, failure.Wrap(failure.SandboxOutputPublishForbid, err, "publication grant redemption: encode the request")
	}
	out, err := h.run(ctx, body)
	if err != nil {
		return gitops.Credential{}, err
	}
	return finish(out, h.Now, h.Policy)
}

func (h *Helper) run(ctx context.Context, stdin []byte) ([]byte, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout := procgroup.NewCappedOutput(MaxResponseBytes, cancel)
	cmd := exec.CommandContext(runCtx, h.Path)
	cmd.Args = []string{h.Path}
	cmd.Env = procgroup.HelperEnv()
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = stdout
	cmd.Stderr = nil // discarded: it may hold anything, the secret included
	err := procgroup.RunHelper(cmd)
	out, overflow := stdout.Result()
	if err == nil && !overflow {
		return out, nil
	}
	refuse := func(cause error, format string, args ...any) ([]byte, error) {
		// The message is curated: the cause stays in the chain, unrendered.
		return nil, failure.WrapWithheld(failure.SandboxOutputPublishForbid, cause, "publication grant redemption: credential helper "+format, args...)
	}
	var exit *exec.ExitError
	switch {
	case overflow:
		return refuse(errOverflow, "printed more than %d bytes", MaxResponseBytes)
	case ctx.Err() != nil:
		return refuse(ctx.Err(), "cancelled: %v", ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return refuse(context.DeadlineExceeded, "timed out after %s", timeout)
	case errors.Is(err, exec.ErrWaitDelay):
		return refuse(err, "exited but left its output open (a background process kept stdout)")
	case errors.As(err, &exit):
		return refuse(err, "failed: %s", procgroup.DescribeExit(exit))
	default:
		return refuse(err, "could not run: %v", err)
	}
}

// finish decodes and validates an answer.
func finish(answer []byte, now func() time.Time, policy RemotePolicy) (gitops.Credential, error) {
	cred, err := ParseResponse(answer)
	if err != nil {
		return gitops.Credential{}, err
	}
	if now == nil {
		now = time.Now
	}
	if err := gitops.ValidateCredential(cred, now(), policy.Validate); err != nil {
		return gitops.Credential{}, err
	}
	return cred, nil
}

// errOverflow is the cause of a refusal for an oversized answer.
var errOverflow = errors.New("answer exceeds the size bound")
