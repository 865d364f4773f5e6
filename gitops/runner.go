package gitops

import (
	"context"
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/procgroup"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// Runner defaults.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxOutput = 4 << 20
	// stderrTail is how much of the end of stderr is kept for diagnostics.
	stderrTail = 4 << 10
	// excerptLen bounds the stderr excerpt carried in errors.
	excerptLen = 300
	// waitDelay bounds how long Run waits for git's output pipes to close
	// after git is gone (only a process git left behind, or another child
	// forked by this process that inherited the pipe and has not exec'd
	// yet, holds them open). At 2 s a successful `git rev-parse` failed
	// with exec.ErrWaitDelay on a 2-core machine at a load average of 11
	// (TestFleetOfDaemons, 2026-12-04): the bound is for leftovers, not for
	// a scheduler that is merely slow.
	waitDelay = 10 * time.Second
)

// errOutputLimit is the cause of a failure for output past the cap.
var errOutputLimit = errors.New("git output limit exceeded")

// Runner runs the git binary with a per-call timeout and an output cap. The
// zero value is not useful; use NewRunner. A Runner is safe for concurrent
// use as long as its fields are not modified.
type Runner struct {
	// GitPath is the git executable, looked up in PATH when it has no slash.
	GitPath string
	// Timeout applies to calls whose RunOpts.Timeout is zero.
	Timeout time.Duration
	// MaxOutput caps stdout for calls whose RunOpts.MaxOutput is zero.
	MaxOutput int64
}

// RunOpts tunes one Run call. Zero fields take the Runner's defaults.
type RunOpts struct {
	// Timeout bounds the call; the process group is killed when it expires.
	Timeout time.Duration
	// MaxOutput caps stdout; exceeding it kills git and fails the call.
	MaxOutput int64
	// Env is appended to the sanitised environment (later entries win).
	// Entries naming GIT_CONFIG* variables are dropped: configuration goes
	// through Config, after the hardening (see Run).
	Env []string
	// Config is extra configuration ("key=value") for this call, given to
	// git through GIT_CONFIG_COUNT after the hardening settings, so that
	// it may loosen one of them (protocol.file.allow=always, say) and never
	// appears in argv.
	Config []string
	// Code is the failure code of errors from this call
	// (failure.SandboxRuntimeFailed when empty).
	Code failure.Code
	// Stdin feeds git's standard input (empty when nil). Run returns when
	// git exits even if a Read on Stdin is still blocked.
	Stdin io.Reader
	// Stdout, when set, receives git's standard output as it comes instead
	// of Run's result (which is then ""); MaxOutput still caps it. A write
	// error from Stdout kills git and fails the call.
	Stdout io.Writer
	// MaxFileBytes, when positive, bounds every file git and the
	// processes it starts afterwards write (RLIMIT_FSIZE, set on git as
	// soon as it has started; see limitFileSize): a fetch cannot write a
	// pack past it. A process git started before the limit was set (none,
	// for a fetch: it forks index-pack only once the remote answered)
	// escapes it.
	MaxFileBytes int64
	// Redact lists secrets that must never reach an error. Each non-empty
	// entry is replaced in stderr before the excerpt is taken, longest
	// first. When stderr was longer than the kept tail, the tail's leading
	// partial line is dropped too, so a secret cut by the truncation cannot
	// survive as a fragment; this relies on secrets holding no CR or LF.
	Redact []string
}

// NewRunner returns a Runner using "git" from PATH, DefaultTimeout and
// DefaultMaxOutput.
func NewRunner() *Runner {
	return &Runner{GitPath: "git", Timeout: DefaultTimeout, MaxOutput: DefaultMaxOutput}
}

// Run runs `git -C dir args...` (without -C when dir is empty) and returns
// its stdout. Every call is hardened (see hardening): no system or global
// configuration, no hooks, no fsmonitor, no transport protocol unless the
// call's Config allows one, replace objects ignored, and safe.directory
// naming exactly dir. git runs in its own session, so it has no controlling
// terminal, and with prompts disabled; the whole process group is killed on
// timeout, on cancellation of ctx and when stdout exceeds the cap. Every
// error is a *failure.Error with opts.Code whose message names the git
// subcommand and carries a bounded single-line excerpt of stderr; it wraps
// the *exec.ExitError (see ExitCode) or the context error.
func (r *Runner) Run(ctx context.Context, dir string, opts RunOpts, args ...string) (string, error) {
	timeout, limit, code := r.Timeout, r.MaxOutput, opts.Code
	if opts.Timeout > 0 {
		timeout = opts.Timeout
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if opts.MaxOutput > 0 {
		limit = opts.MaxOutput
	}
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	if code == "" {
		code = failure.SandboxRuntimeFailed
	}
	gitPath := r.GitPath
	if gitPath == "" {
		gitPath = "git"
	}
	sub := subcommand(args)

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	argv := make([]string, 0, len(args)+2)
	if dir != "" {
		argv = append(argv, "-C", dir)
	}
	argv = append(argv, args...)

	stdout := procgroup.NewCappedOutput(limit, cancel)
	stderr := &tailWriter{max: stderrTail}
	cmd := exec.CommandContext(runCtx, gitPath, argv...)
	cmd.Env = gitEnv(dir, opts.Config, opts.Env)
	var stream *streamOutput
	if opts.Stdout != nil {
		stream = &streamOutput{w: opts.Stdout, left: limit, onOverflow: cancel}
		cmd.Stdout = stream
	} else {
		cmd.Stdout = stdout
	}
	cmd.Stderr = stderr
	procgroup.Isolate(cmd)
	cmd.WaitDelay = waitDelay

	err := start(cmd, opts.Stdin)
	if err == nil && opts.MaxFileBytes > 0 {
		if limitErr := limitFileSize(cmd.Process.Pid, opts.MaxFileBytes); limitErr != nil {
			cancel()
			_ = cmd.Wait()
			return "", failure.Wrap(code, limitErr, "git %s: bound its file size", sub)
		}
	}
	if err == nil {
		err = cmd.Wait()
	}
	out, overflow := stdout.Result()
	if stream != nil {
		overflow = stream.overflowed()
	}
	switch {
	case overflow:
		return "", failure.Wrap(code, errOutputLimit, "git %s: output exceeds %d bytes", sub, limit)
	case err == nil:
		return string(out), nil
	case ctx.Err() != nil:
		return "", failure.Wrap(code, ctx.Err(), "git %s", sub)
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return "", failure.Wrap(code, context.DeadlineExceeded, "git %s: timed out after %s", sub, timeout)
	default:
		return "", failure.WrapWithheld(code, err, "git %s: %s%s", sub, describeExit(err), excerpt(redact(stderr, opts.Redact)))
	}
}

// start starts cmd and feeds it stdin from a goroutine that Wait does not
// await: exec would otherwise wait for a blocked reader forever after git
// is gone. The pipe is closed by Wait, which ends the copy once git exits.
func start(cmd *exec.Cmd, stdin io.Reader) error {
	if stdin == nil {
		return cmd.Start()
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(w, stdin)
		_ = w.Close()
	}()
	return nil
}

// ExitCode returns git's exit status carried by err, or -1 when err did not
// come from git exiting on its own (timeout, cancellation, start failure).
func ExitCode(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	return -1
}

func describeExit(err error) string {
	if code := ExitCode(err); code >= 0 {
		return fmt.Sprintf("exit status %d", code)
	}
	return err.Error()
}

// unsafeEnv are inherited variables that would point git at another
// repository, object store or history than the one named with -C, or
// loosen its configuration.
var unsafeEnv = map[string]bool{
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_IMPLICIT_WORK_TREE":           true,
	"GIT_COMMON_DIR":                   true,
	"GIT_INDEX_FILE":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_QUARANTINE_PATH":              true,
	"GIT_NAMESPACE":                    true,
	"GIT_GRAFT_FILE":                   true,
	"GIT_SHALLOW_FILE":                 true,
	"GIT_REPLACE_REF_BASE":             true,
	"GIT_PREFIX":                       true,
	"GIT_CONFIG":                       true,
	"GIT_CONFIG_GLOBAL":                true,
	"GIT_CONFIG_SYSTEM":                true,
	"GIT_CONFIG_NOSYSTEM":              true,
	"GIT_CONFIG_PARAMETERS":            true,
	"GIT_CONFIG_COUNT":                 true,
	"GIT_EXEC_PATH":                    true,
	"GIT_TEMPLATE_DIR":                 true,
	// GIT_ALLOW_PROTOCOL overrides protocol.allow and every
	// protocol.<name>.allow: inherited, it could re-open ext:: under the
	// hardening's protocol.allow=never.
	"GIT_ALLOW_PROTOCOL": true,
}

// hardening is the configuration every git call forged makes starts from,
// whatever the repository's own configuration says (command-line scope
// beats it): hooks point nowhere, no fsmonitor, and no transport protocol
// at all; a call that must reach a remote or a local repository allows
// exactly that protocol in its RunOpts.Config.
var hardening = []string{
	"core.hooksPath=" + os.DevNull,
	"core.fsmonitor=false",
	"protocol.allow=never",
}

// configEnv renders the hardening, safe.directory=dir (when dir is set)
// and extra as GIT_CONFIG_COUNT/KEY/VALUE variables, with the system and
// global configuration switched off.
func configEnv(dir string, extra []string) []string {
	entries := append([]string{}, hardening...)
	if dir != "" {
		entries = append(entries, "safe.directory="+dir)
	}
	entries = append(entries, extra...)
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_ATTR_NOSYSTEM=1",
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(entries)),
	}
	for i, kv := range entries {
		key, value, _ := strings.Cut(kv, "=")
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, value))
	}
	return env
}

// isConfigVar reports whether an environment variable name configures git.
func isConfigVar(name string) bool { return strings.HasPrefix(name, "GIT_CONFIG") }

// gitEnv is the inherited environment without repository-locating or
// configuring variables, with prompting disabled and the C locale, then the
// hardened configuration for dir with config (see configEnv), then extra
// without its GIT_CONFIG* entries.
func gitEnv(dir string, config, extra []string) []string {
	parent := os.Environ()
	env := make([]string, 0, len(parent)+6+len(extra))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if !unsafeEnv[name] && !isConfigVar(name) {
			env = append(env, kv)
		}
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=", // set but empty: git asks no helper and, with prompts off, fails
		"SSH_ASKPASS=",
		"GCM_INTERACTIVE=never",
		"LC_ALL=C",
		"LANGUAGE=",
	)
	env = append(env, configEnv(dir, config)...)
	for _, kv := range extra {
		if name, _, _ := strings.Cut(kv, "="); !isConfigVar(name) {
			env = append(env, kv)
		}
	}
	return env
}

// subcommand names the git subcommand in args for messages, skipping
// global options such as -c key=value.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return "(none)"
}

// excerpt renders stderr as ": <one line>" bounded to excerptLen bytes,
// keeping the end where git puts its fatal message; "" when stderr is empty.
func excerpt(stderr string) string {
	s := strings.ToValidUTF8(stderr, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return ""
	}
	return ": " + text.EllipsisTail(s, excerptLen)
}

// redactMark replaces secrets in stderr excerpts.
const redactMark = "[redacted]"

// redact returns w's tail with every secret replaced by redactMark. With
// no secrets it is w.String(). Otherwise, if the tail lost its beginning,
// everything up to the first line break is dropped: a secret without line
// breaks that straddled the cut lies entirely in that dropped prefix.
func redact(w *tailWriter, secrets []string) string {
	s, truncated := w.snapshot()
	live := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		if secret != "" {
			live = append(live, secret)
		}
	}
	if len(live) == 0 {
		return s
	}
	if truncated {
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			s = s[i+1:]
		} else {
			s = ""
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return len(live[i]) > len(live[j]) })
	for _, secret := range live {
		s = strings.ReplaceAll(s, secret, redactMark)
	}
	return s
}

// streamOutput hands git's stdout to w while at most left bytes have
// come; past that (or when w fails) it refuses the write and stops git.
type streamOutput struct {
	mu         sync.Mutex
	w          io.Writer
	left       int64
	overflow   bool
	onOverflow func()
}

func (s *streamOutput) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		return 0, errOutputLimit
	}
	if int64(len(p)) > s.left {
		s.overflow = true
		s.onOverflow()
		return 0, errOutputLimit
	}
	s.left -= int64(len(p))
	n, err := s.w.Write(p)
	if err != nil {
		s.onOverflow()
	}
	return n, err
}

func (s *streamOutput) overflowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflow
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu        sync.Mutex
	buf       []byte
	max       int
	truncated bool // bytes were dropped from the front
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
		w.truncated = true
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	s, _ := w.snapshot()
	return s
}

// snapshot returns the kept tail and whether bytes were dropped before it.
func (w *tailWriter) snapshot() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf), w.truncated
}
