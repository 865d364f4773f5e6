package redeem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/procgroup"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
)

// DefaultTimeout bounds one redemption when none is configured.
const DefaultTimeout = 30 * time.Second

// helperPath is the PATH a credential helper runs with.
const helperPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// waitDelay bounds how long a redemption waits for the helper's output to
// close once the helper's process group is killed.
const waitDelay = 2 * time.Second

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

// helperEnv is the helper's whole environment: a fixed PATH, the C locale
// and the daemon's HOME and TMPDIR, nothing else. The daemon's own
// variables (FORGED_*, proxies, tokens, git settings) are not passed on.
func helperEnv() []string {
	env := []string{"PATH=" + helperPath, "LC_ALL=C"}
	for _, name := range []string{"HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// Redeem runs the helper with the request on stdin and decodes its stdout
// (see ParseResponse), then validates the credential (see
// gitops.ValidateCredential) against the policy. A helper that cannot
// start, exits non-zero or by a signal, outlives the timeout or prints more
// than MaxResponseBytes is refused with failure.SandboxOutputPublishForbid;
// the reason names what happened, never what the helper printed.
func (h *Helper) Redeem(ctx context.Context, req actors.PublicationRequest) (gitops.Credential, error) {
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
	stdout := &boundedBuffer{limit: MaxResponseBytes, onOverflow: cancel}
	cmd := exec.CommandContext(runCtx, h.Path)
	cmd.Args = []string{h.Path}
	cmd.Env = helperEnv()
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = stdout
	cmd.Stderr = nil // discarded: it may hold anything, the secret included
	procgroup.Isolate(cmd)
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if cmd.Process != nil {
		// The helper may have left children in its group: they have no
		// business outliving it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out, overflow := stdout.result()
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
		return refuse(err, "failed: %s", describeExit(exit))
	default:
		return refuse(err, "could not run: %v", err)
	}
}

// describeExit renders an exit status or the signal that ended the helper.
func describeExit(exit *exec.ExitError) string {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", exit.ExitCode())
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

// boundedBuffer keeps up to limit bytes and reports overflow (calling
// onOverflow once) instead of growing further.
type boundedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int
	overflow   bool
	onOverflow func()
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflow {
		return 0, errOverflow
	}
	if b.buf.Len()+len(p) > b.limit {
		b.overflow = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return 0, errOverflow
	}
	return b.buf.Write(p)
}

// result returns a copy of what was kept and whether the bound was crossed.
func (b *boundedBuffer) result() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes()), b.overflow
}
