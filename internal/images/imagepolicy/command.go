package imagepolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/forgedev/forged/internal/kit/procgroup"
)

// DefaultTimeout bounds one SBOM generation or one scan.
const DefaultTimeout = 10 * time.Minute

// maxStderr is what is kept of a helper's stderr for its failure message.
const maxStderr = 2 << 10

// offlineEnv keeps a syft-compatible generator off the network: no update
// check (forged's build hosts may have none, and an SBOM must not depend on
// one).
var offlineEnv = []string{"SYFT_CHECK_FOR_APP_UPDATE=false", "GRYPE_CHECK_FOR_APP_UPDATE=false"}

// GenerateSBOM runs the SBOM command over the image archive (a docker save
// tar) and has it write CycloneDX JSON to out.
func GenerateSBOM(ctx context.Context, command string, timeout time.Duration, archive, out string) error {
	_, err := runHelper(ctx, "SBOM command", command, timeout, 0,
		"scan", "docker-archive:"+archive, "--output", "cyclonedx-json="+out)
	return err
}

// Scan runs the scan command over the SBOM and decodes its findings.
func Scan(ctx context.Context, command string, timeout time.Duration, sbom string) (Findings, error) {
	out, err := runHelper(ctx, "scan command", command, timeout, MaxFindingsBytes, "--", sbom)
	if err != nil {
		return Findings{}, err
	}
	f, err := ParseFindings(out)
	if err != nil {
		return Findings{}, fmt.Errorf("scan command %s answered %w", command, err)
	}
	return f, nil
}

// runHelper runs command with args, returns its stdout (up to limit bytes;
// limit 0 discards it) and, on failure, an error naming how it ended and
// the tail of its stderr.
func runHelper(ctx context.Context, what, command string, timeout time.Duration, limit int64, args ...string) ([]byte, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, command, args...)
	cmd.Env, cmd.Dir = procgroup.HelperEnv(offlineEnv...), "/"
	var stdout *procgroup.CappedOutput
	if limit > 0 {
		stdout = procgroup.NewCappedOutput(limit, cancel)
		cmd.Stdout = stdout
	}
	stderr := &tailBuffer{keep: maxStderr}
	cmd.Stderr = stderr
	err := procgroup.RunHelper(cmd)
	if stdout != nil {
		if _, over := stdout.Result(); over {
			return nil, fmt.Errorf("%s %s wrote more than %d bytes", what, command, limit)
		}
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s cancelled: %w", what, ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s %s timed out after %s", what, command, timeout)
	case errors.As(err, &exit):
		return nil, fmt.Errorf("%s %s ended with %s: %s", what, command, procgroup.DescribeExit(exit), stderr.text())
	default:
		return nil, fmt.Errorf("%s %s could not run: %w", what, command, err)
	}
	if stdout == nil {
		return nil, nil
	}
	out, _ := stdout.Result()
	return out, nil
}

// tailBuffer keeps the last keep bytes written to it. It is locked: exec
// may give up on its copying goroutine (WaitDelay) while the caller reads.
type tailBuffer struct {
	mu   sync.Mutex
	keep int
	buf  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.keep; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(bytes.ToValidUTF8(t.buf, nil)))
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		return "(no output)"
	}
	return s
}
