package gitops

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestRunnerReturnsStdout(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	out, err := NewRunner().Run(testCtx(t), repo, RunOpts{}, "rev-parse", "HEAD")
	require.NoError(t, err)
	assert.Equal(t, gitT(t, repo, "rev-parse", "HEAD")+"\n", out)
}

func TestRunnerFailureIsCodedWithExcerpt(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	_, err := NewRunner().Run(testCtx(t), repo, RunOpts{Code: failure.SandboxInputFailed}, "rev-parse", "--verify", "no-such-ref")
	require.Error(t, err)
	var coded *failure.Error
	require.ErrorAs(t, err, &coded)
	assert.Equal(t, failure.SandboxInputFailed, coded.Code)
	assert.Equal(t, 128, ExitCode(err))
	assert.Contains(t, err.Error(), "git rev-parse")
	assert.Contains(t, err.Error(), "fatal: Needed a single revision")
	assert.NotContains(t, err.Error(), "\n")
}

func TestRunnerDefaultCode(t *testing.T) {
	t.Parallel()
	_, err := NewRunner().Run(testCtx(t), t.TempDir(), RunOpts{}, "rev-parse", "HEAD")
	assert.True(t, failure.Is(err, failure.SandboxRuntimeFailed), "%v", err)
}

func TestRunnerOutputCap(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	_, err := NewRunner().Run(testCtx(t), repo, RunOpts{MaxOutput: 10, Code: failure.SandboxOutputInvalid},
		"cat-file", "--batch-all-objects", "--batch-check")
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxOutputInvalid))
	assert.ErrorIs(t, err, errOutputLimit)
	assert.Contains(t, err.Error(), "output exceeds 10 bytes")
}

// A streamed stdout is capped as a collected one, and a failing writer
// stops git.
func TestRunnerStreamedOutput(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	var buf strings.Builder
	out, err := NewRunner().Run(testCtx(t), repo, RunOpts{Stdout: &buf}, "rev-parse", "HEAD")
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Len(t, strings.TrimSpace(buf.String()), 40)

	buf.Reset()
	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{MaxOutput: 10, Stdout: &buf, Code: failure.SandboxInputFailed},
		"cat-file", "--batch-all-objects", "--batch-check")
	assert.True(t, failure.Is(err, failure.SandboxInputFailed), "%v", err)
	assert.ErrorIs(t, err, errOutputLimit)
	assert.Empty(t, buf.String(), "nothing past the cap reaches the writer")

	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{Stdout: failingWriter{}, Stdin: blockingStdin(t)}, "cat-file", "--batch-check", "--batch-all-objects")
	assert.Error(t, err)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// blockingStdin is a reader that never returns data, so `git cat-file
// --batch` waits forever.
func blockingStdin(t *testing.T) io.Reader {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	return r
}

func TestRunnerTimeoutKillsGit(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	start := time.Now()
	_, err := NewRunner().Run(testCtx(t), repo, RunOpts{Timeout: 200 * time.Millisecond, Stdin: blockingStdin(t), Code: failure.SandboxInputFailed},
		"cat-file", "--batch")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, failure.Is(err, failure.SandboxInputFailed))
	assert.Contains(t, err.Error(), "timed out")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestRunnerCancellation(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := NewRunner().Run(ctx, repo, RunOpts{Stdin: blockingStdin(t)}, "cat-file", "--batch")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, failure.Is(err, failure.SandboxRuntimeFailed))
}

// Not parallel: it changes the process environment.
func TestRunnerIgnoresRepositoryEnvironment(t *testing.T) {
	repo := newRepo(t)
	t.Setenv("GIT_DIR", t.TempDir())
	t.Setenv("GIT_INDEX_FILE", "/nonexistent/index")
	out, err := NewRunner().Run(testCtx(t), repo, RunOpts{}, "rev-parse", "--show-toplevel")
	require.NoError(t, err)
	assert.Equal(t, repo, strings.TrimSpace(out))
}

func TestRunnerExtraEnv(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	out, err := NewRunner().Run(testCtx(t), repo, RunOpts{Config: []string{"forge.probe=yes"}, Env: []string{"X_PROBE=1"}},
		"config", "--get", "forge.probe")
	require.NoError(t, err)
	assert.Equal(t, "yes\n", out)
	// Configuration smuggled through Env is dropped: it would replace the
	// hardening.
	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{Env: []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=forge.probe", "GIT_CONFIG_VALUE_0=yes"}},
		"config", "--get", "forge.probe")
	require.Error(t, err)
}

func TestGitEnvDisablesPrompts(t *testing.T) {
	t.Parallel()
	env := gitEnv("", nil, []string{"X_EXTRA=1"})
	for _, want := range []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "LC_ALL=C"} {
		assert.Contains(t, env, want)
	}
	assert.Equal(t, "X_EXTRA=1", env[len(env)-1])
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400) + " fatal: the end"
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"blank", " \n\t ", ""},
		{"single line", "fatal: bad\n", ": fatal: bad"},
		{"multi line collapsed", "warning: x\r\nfatal:\tbad \x1b[31mthing\n", ": warning: x fatal: bad [31mthing"},
		{"invalid utf8", "bad \xff byte", ": bad ? byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, excerpt(tc.in))
		})
	}
	got := excerpt(long)
	assert.True(t, strings.HasSuffix(got, "fatal: the end"))
	assert.True(t, strings.HasPrefix(got, ": …"))
	assert.LessOrEqual(t, len(got), excerptLen+len(": …"))
	assert.True(t, strings.ToValidUTF8(got, "?") == got, "excerpt must stay valid UTF-8")
}

func TestSubcommand(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "fetch", subcommand([]string{"-c", "a=b", "--no-pager", "fetch", "origin"}))
	assert.Equal(t, "(none)", subcommand([]string{"-c", "a=b"}))
	assert.Equal(t, "(none)", subcommand(nil))
}

func TestExitCodeOfNonExitError(t *testing.T) {
	t.Parallel()
	assert.Equal(t, -1, ExitCode(errors.New("x")))
	assert.Equal(t, -1, ExitCode(nil))
}
