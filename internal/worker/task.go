package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TaskPath is the PATH of the task when the worker's environment (the
// project image's) has none.
const TaskPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Reasons a task ended.
const (
	reasonExited       = "exited"
	reasonTimeout      = "timeout"
	reasonIdle         = "idle_timeout"
	reasonLeaseExpired = "lease_expired"
	reasonCancelled    = "cancelled"
	reasonStartFailed  = "start_failed"
)

// taskOutcome is how the task ended.
type taskOutcome struct {
	// ExitCode is the task's exit status, 128+signal when it was killed by
	// a signal, 126/127 when it could not be started.
	ExitCode int
	// Reason is one of the reason* constants.
	Reason string
	// Timeout is the task's time budget and Idle its idle limit (for the
	// summary).
	Timeout time.Duration
	Idle    time.Duration
	// StartErr is why the task could not start.
	StartErr error
}

func (o taskOutcome) succeeded() bool { return o.Reason == reasonExited && o.ExitCode == 0 }

// describe is a one-line account of how the task ended.
func (o taskOutcome) describe() string {
	switch o.Reason {
	case reasonTimeout:
		return fmt.Sprintf("task timed out after %s and was stopped (code %d)", o.Timeout, o.ExitCode)
	case reasonIdle:
		return fmt.Sprintf("task wrote no output for %s and was stopped (code %d)", o.Idle, o.ExitCode)
	case reasonLeaseExpired:
		return fmt.Sprintf("task stopped at lease expiry (code %d)", o.ExitCode)
	case reasonCancelled:
		return fmt.Sprintf("task cancelled (code %d)", o.ExitCode)
	case reasonStartFailed:
		return fmt.Sprintf("task could not start (code %d): %v", o.ExitCode, o.StartErr)
	}
	if o.ExitCode == 0 {
		return "task succeeded"
	}
	return fmt.Sprintf("task failed with code %d", o.ExitCode)
}

// summary is the result packet's summary.
func (o taskOutcome) summary(resultSHA *string) string {
	if resultSHA == nil {
		return o.describe() + "; no changes"
	}
	return o.describe() + "; result committed as " + *resultSHA
}

// runTask runs the task in dir and streams its output as events. It
// enforces the time budget and the lease deadline (SIGTERM to the process
// group, SIGKILL after the grace) and reports how the task ended.
func (r *run) runTask(ctx context.Context, dir string) taskOutcome {
	timeout := time.Duration(taskTimeoutSeconds(r.pkt)) * time.Second
	idle := time.Duration(r.pkt.IdleTimeoutSeconds) * time.Second
	argv := r.pkt.Task.Argv
	outcome := r.startAndWait(ctx, argv, dir, timeout, idle)
	outcome.Timeout, outcome.Idle = timeout, idle
	r.events.lifecycle("task_exited", outcome.describe(),
		map[string]any{"exitCode": outcome.ExitCode, "reason": outcome.Reason})
	return outcome
}

func (r *run) startAndWait(ctx context.Context, argv []string, dir string, timeout, idle time.Duration) taskOutcome {
	if err := prepareTaskDirs(r.cfg); err != nil {
		return taskOutcome{ExitCode: 126, Reason: reasonStartFailed, StartErr: err}
	}
	env := append(taskEnv(r.cfg), messages.ServiceEnv(r.pkt.Services)...)
	path, err := lookPath(argv[0], taskPath(env))
	if err != nil {
		return taskOutcome{ExitCode: 127, Reason: reasonStartFailed, StartErr: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return taskOutcome{ExitCode: 126, Reason: reasonStartFailed, StartErr: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return taskOutcome{ExitCode: 126, Reason: reasonStartFailed, StartErr: err}
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Dir:         dir,
		Env:         env,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	watchSock := r.throughShim(cmd, path)
	err = cmd.Start()
	closeAll(outW, errW)
	closeAll(cmd.ExtraFiles...)
	if err != nil {
		closeAll(outR, errR)
		if watchSock != nil {
			closeAll(watchSock)
		}
		code := 126
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return taskOutcome{ExitCode: code, Reason: reasonStartFailed, StartErr: err}
	}
	pgid := cmd.Process.Pid
	if watchSock == nil {
		raiseOOMScore(pgid)
	} else if stopWatch := r.startWatch(watchSock); stopWatch != nil {
		defer stopWatch()
	}
	r.events.lifecycle("task_started", "task started: "+boundLine(argv[0], 256),
		map[string]any{"workingDirectory": r.pkt.WorkingDirectory, "timeoutSeconds": int(timeout / time.Second)})

	var pumps sync.WaitGroup
	pumps.Add(2)
	activity := make(chan struct{}, 1)
	pipes := &drainPipes{files: []*os.File{outR, errR}}
	go r.pump(&pumps, pipes.reader(outR), "stdout", activity)
	go r.pump(&pumps, pipes.reader(errR), "stderr", activity)

	waitC := make(chan error, 1)
	go func() { waitC <- cmd.Wait() }()

	reason := r.supervise(ctx, pgid, timeout, idle, activity, waitC)

	// Stragglers left in the task's process group would keep the pipes
	// open and keep changing the workspace: kill them all.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if pipes.drain(pumpsDone(&pumps), r.cfg.DrainGrace, r.cfg.DrainLimit) {
		r.note("a process outside the task's process group still wrote to its output %s after the task ended; its output was cut", r.cfg.DrainLimit)
	}
	closeAll(outR, errR)
	return taskOutcome{ExitCode: exitCode(cmd.ProcessState), Reason: reason}
}

// throughShim makes cmd start the task through the task shim (the exit
// watch, exitwatch_linux.go) when the worker has one, and returns the
// worker's end of the socket the shim sends the watch's listener on; nil
// when the task starts directly.
func (r *run) throughShim(cmd *exec.Cmd, path string) *os.File {
	if r.cfg.TaskShim == "" || !watchAvailable || r.watch == nil {
		return nil
	}
	mine, theirs, err := shimSocket()
	if err != nil {
		r.note("exit watch unavailable: %v", err)
		return nil
	}
	cmd.Args = append([]string{r.cfg.TaskShim, "worker", TaskExecCommand, path}, cmd.Args...)
	cmd.Path = r.cfg.TaskShim
	cmd.ExtraFiles = []*os.File{theirs}
	return mine
}

// startWatch receives the shim's listener and serves it until the
// returned stop is called; nil when the shim could not install the watch
// (the task then runs under the sampling alone).
func (r *run) startWatch(sock *os.File) (stop func()) {
	listener := receiveListener(sock)
	closeAll(sock)
	if listener < 0 {
		r.note("exit watch unavailable: the kernel or the seccomp profile refused the task's filter")
		return nil
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		serveWatch(listener, r.watch, quit)
	}()
	return func() { close(quit); <-done }
}

// supervise waits for the task to exit, stopping it on timeout, on idle
// (no output line for idle, when idle > 0), lease expiry or cancellation. The lease timer is armed at the monotonic lease
// deadline; when it fires, the lease update file is consulted once and the
// timer re-armed when a valid update moved the deadline (see renewLease).
// It returns the reason the task ended.
func (r *run) supervise(ctx context.Context, pgid int, timeout, idle time.Duration, activity <-chan struct{}, waitC <-chan error) string {
	timeoutT := time.NewTimer(timeout)
	defer timeoutT.Stop()
	var idleT *time.Timer
	var idleC <-chan time.Time
	if idle > 0 {
		idleT = time.NewTimer(idle)
		defer idleT.Stop()
		idleC = idleT.C
	}
	leaseT := time.NewTimer(r.lease.Remaining())
	defer leaseT.Stop()
	done := ctx.Done()
	var killC <-chan time.Time
	reason := reasonExited
	stop := func(why string) {
		if reason != reasonExited {
			return
		}
		reason = why
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		killC = time.After(r.cfg.KillGrace)
	}
	for {
		select {
		case <-waitC:
			return reason
		case <-activity:
			if idleT != nil && reason == reasonExited {
				idleT.Reset(idle) // Go 1.23 timers: Reset drops a pending fire
			}
		case <-timeoutT.C:
			stop(reasonTimeout)
		case <-idleC:
			stop(reasonIdle)
		case <-leaseT.C:
			if reason == reasonExited && r.renewLease() {
				leaseT.Reset(r.lease.Remaining())
				continue
			}
			stop(reasonLeaseExpired)
		case <-done:
			done = nil
			stop(reasonCancelled)
		case <-killC:
			killC = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// pump forwards the lines read from rd as task_output events, and signals
// activity (without blocking) for each line: the idle limit counts every
// line, also those beyond the event budget.
func (r *run) pump(wg *sync.WaitGroup, rd io.Reader, stream string, activity chan<- struct{}) {
	defer wg.Done()
	readLines(rd, MaxEventLineBytes, func(line string) {
		select {
		case activity <- struct{}{}:
		default:
		}
		sent, first := r.events.taskOutput(stream, line)
		if first {
			r.note("task output exceeds its budget of %d bytes of event lines; further lines are dropped", r.cfg.MaxOutputBytes)
		}
		if !sent {
			r.events.active()
		}
	})
}

// readLines calls fn for each line of rd (without the line terminator and
// a trailing carriage return), keeping at most max bytes of each line and
// discarding the rest. A final line without terminator is reported too.
func readLines(rd io.Reader, max int, fn func(string)) {
	br := bufio.NewReaderSize(rd, 64<<10)
	var line []byte
	partial := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			partial = true
		}
		if room := max + 2 - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if partial {
			s := strings.TrimSuffix(string(line), "\n")
			s = strings.TrimSuffix(s, "\r")
			fn(text.Clip(s, max))
		}
		line, partial = line[:0], false
		if err != nil {
			return
		}
	}
}

// lookPath resolves argv[0]: a name with a slash is used as is (relative
// to the working directory), any other name is searched in the
// colon-separated directories of path (the task's PATH; an empty entry is
// skipped, never the working directory).
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, name)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%q: executable file not found in %s", name, path)
}

// xdgDirs are the XDG base directories of the task, relative to HOME, in
// the order of taskEnv.
var xdgDirs = []struct{ env, rel string }{
	{"XDG_CACHE_HOME", ".cache"},
	{"XDG_CONFIG_HOME", ".config"},
	{"XDG_DATA_HOME", ".local/share"},
	{"XDG_STATE_HOME", ".local/state"},
}

// prepareTaskDirs makes sure the task's HOME, TMPDIR and XDG base
// directories exist (created 0700) and are directories. Toolchains write
// their caches and configuration there (Go's build cache under
// XDG_CACHE_HOME, npm's under HOME, cargo's CARGO_HOME). A link the
// project image put there is followed: the worker runs as the task's own
// user, so it reaches nothing the task could not.
func prepareTaskDirs(cfg Config) error {
	dirs := []string{cfg.HomeDir, cfg.TempDir}
	for _, x := range xdgDirs {
		dirs = append(dirs, filepath.Join(cfg.HomeDir, x.rel))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("prepare the task's directories: %w", err)
		}
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("prepare the task's directories: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("prepare the task's directories: %s is not a directory", d)
		}
	}
	return nil
}

// taskEnv is the task's environment: the worker's own environment (the
// project image's ENV, as the engine merged it with forged's container
// environment) with HOME, TMPDIR and the XDG base directories set by
// forged. PATH is the environment's, or TaskPath when it has none. Names
// that are not portable shell names are dropped, and the first of
// duplicates wins.
func taskEnv(cfg Config) []string {
	src := cfg.Environ
	if src == nil {
		src = os.Environ()
	}
	env := []string{"PATH=" + taskPath(src), "HOME=" + cfg.HomeDir, "TMPDIR=" + cfg.TempDir}
	seen := map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true}
	for _, x := range xdgDirs {
		env = append(env, x.env+"="+filepath.Join(cfg.HomeDir, x.rel))
		seen[x.env] = true
	}
	for _, kv := range src {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) || seen[k] {
			continue
		}
		seen[k] = true
		env = append(env, kv)
	}
	return env
}

// taskPath is the first non-empty PATH of env, or TaskPath.
func taskPath(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			if v != "" {
				return v
			}
			break
		}
	}
	return TaskPath
}

// validEnvName reports whether k is a portable shell variable name.
func validEnvName(k string) bool {
	for i, c := range k {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && c != '_' && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return k != ""
}

// exitCode is the task's exit status, 128+signal when a signal ended it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
