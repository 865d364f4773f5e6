// Package worker is the program that runs inside the sandbox container
// ("forged worker"), as an unprivileged user on a read-only root filesystem,
// with no git binary and no shell available.
//
// One run of the worker handles one attempt:
//
//  1. it reads a messages.StartPacket from stdin (strictly decoded);
//  2. it materialises the input git bundle into the workspace with go-git,
//     verifies the input commit and checks it out on the attempt's branch;
//  3. it runs the task (argv, working directory, the project image's
//     environment with forged's HOME, TMPDIR and XDG base directories,
//     timeout and a monotonic lease deadline that signed lease updates may
//     move), streaming its output lines as runner events on stdout;
//  4. it takes the task's branch as the result (history mode, the
//     default: the task's own commits as written), stages the whole working
//     tree much like "git add --all" (honouring .gitignore, keeping
//     gitlinks, skipping names git refuses) and commits what the task left
//     uncommitted on top; in squash mode it ignores the task's commits and
//     commits the working tree on top of the input. It writes a result
//     bundle holding exactly the objects between the input's history and
//     the result, without deltas, and judges none of them: the host proves
//     the result (descent, budgets, fsck, paths);
//  5. it writes result.json and then manifest.json into the output
//     directory.
//
// Only runner event JSON lines are written to stdout; diagnostics go to
// stderr. Everything the worker produces is untrusted and validated again
// on the host.
//
// # Authentic events
//
// Only the worker speaks for the runner (role "runner"); everything the
// task writes is the agent's, whatever it claims. The channel cannot tell
// them apart: the task runs as the worker's uid, so it can open
// /proc/1/fd/1 and /proc/1/fd/2 (the container's stdout and stderr, held by
// the init process) and write lines into the very stream the host reads.
// So the host decides the role from a key, not from the line:
//
//   - The host draws a random per-attempt control key and sends it only in
//     the start packet, on the worker's stdin. The worker reads stdin to its
//     end before the task exists; the task's stdin is /dev/null and it
//     inherits only its own output pipes (every other descriptor of the
//     worker is close-on-exec). The key is never in an environment, an
//     argument or a file.
//   - The worker makes itself non-dumpable (PR_SET_DUMPABLE 0) before it
//     reads the packet, so that a same-uid task can neither ptrace it nor
//     read /proc/<worker>/mem, environ or fd/.
//   - Every line the worker writes carries a sequence number and an
//     HMAC-SHA256, under messages.EventKey(controlKey), of that number and
//     the exact bytes of the event (messages.SignEventLine). The event key
//     is derived from, and separate from, the lease key.
//   - The host (messages.EventVerifier, in the worker actor) keeps an
//     event's role only when its MAC verifies and its number is above every
//     one verified before; any other line that parses as an event arrives as
//     role "agent", with the host's event type and time, and one that breaks
//     the event format arrives as the agent's text, never as an error. A task can thus suppress or delay worker lines it steals
//     from the pipe, never forge, alter or replay one as the runner's. The
//     host takes no decision from what an event says: outcomes come from
//     the engine's inspected state and the validated output.
package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

// Worker exit codes.
const (
	// ExitOK means the task exited 0 and the output was written.
	ExitOK = 0
	// ExitTaskFailed means the task failed (non-zero exit, timeout, lease
	// expiry, cancellation or could not start) but the output was written.
	ExitTaskFailed = 1
	// ExitInternal means the worker itself failed (bad start packet,
	// invalid bundle, unusable workspace, output not writable); no manifest
	// was written.
	ExitInternal = 2
)

// Defaults used by DefaultConfig.
const (
	DefaultKillGrace      = 10 * time.Second
	DefaultMaxOutputBytes = messages.TaskOutputBudgetBytes
	defaultHomeDir        = messages.HomeDir
	defaultTempDir        = messages.TempDir
)

// Config holds the worker's paths and tunables. DefaultConfig returns the
// in-container values; tests point the paths at temporary directories.
type Config struct {
	// WorkspaceDir is where the input is checked out (".git" inside it) and
	// where the task works. It may exist but must be empty except for a
	// "lost+found" directory.
	WorkspaceDir string
	// InputBundlePath is the host-provided v2 git bundle.
	InputBundlePath string
	// OutputDir receives result.bundle, result.json and manifest.json.
	OutputDir string
	// EventLogPath is the event log (messages.EventLogPath): every event
	// line, appended before it is written on stdout, so that a restarted
	// host can resume the stream. Empty in DefaultConfig's caller means
	// the default; "-" turns it off.
	EventLogPath string
	// LeaseUpdatePath is where the host may write a signed lease.Update to
	// move the lease deadline (see WriteLeaseUpdateFile); it is read when
	// the current deadline is reached.
	LeaseUpdatePath string
	// Released delivers the host's release (messages.ReleaseSignal, which
	// the container's init forwards to the worker) when the start packet
	// asks the worker to wait for it. Nil: no release can come, and a
	// worker asked to wait waits the whole bound.
	Released <-chan os.Signal
	// HomeDir and TempDir are the task's HOME and TMPDIR.
	HomeDir string
	TempDir string
	// Environ is the worker's own environment (the project image's ENV
	// merged with forged's container environment), the task's environment
	// but for the directories forged sets (see taskEnv). Nil means
	// os.Environ().
	Environ []string
	// KillGrace is the time between SIGTERM and SIGKILL when the task is
	// stopped. Zero means DefaultKillGrace.
	KillGrace time.Duration
	// TaskShim is the worker binary that starts the task through the task
	// shim (`worker task-exec`, the exit watch); empty starts the task
	// directly, under the sampling alone.
	TaskShim string
	// MaxOutputBytes bounds the task output forwarded as events, counted
	// in the bytes of the signed task_output lines written (as the host
	// counts the worker's stdout, see messages.TaskOutputBudgetBytes);
	// further lines are dropped (with a diagnostic on stderr). Zero means
	// DefaultMaxOutputBytes; negative means unlimited.
	MaxOutputBytes int64
	// DrainGrace is how long the output pumps wait on an empty pipe once
	// the task's process group is gone, and DrainLimit how long the
	// drain lasts at most (drain.go). Zero means DefaultDrainGrace and
	// DefaultDrainLimit.
	DrainGrace, DrainLimit time.Duration
}

// DefaultConfig returns the configuration of the worker inside the sandbox
// container: the paths from package messages (HOME /home/forge, TMPDIR
// /tmp).
func DefaultConfig() Config {
	return Config{
		WorkspaceDir:    messages.WorkspaceDir,
		InputBundlePath: messages.InputBundlePath,
		OutputDir:       messages.OutputDir,
		LeaseUpdatePath: messages.LeaseUpdatePath,
		EventLogPath:    messages.EventLogPath,
		HomeDir:         defaultHomeDir,
		TempDir:         defaultTempDir,
		KillGrace:       DefaultKillGrace,
		MaxOutputBytes:  DefaultMaxOutputBytes,
		DrainGrace:      DefaultDrainGrace,
		DrainLimit:      DefaultDrainLimit,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.WorkspaceDir == "" {
		c.WorkspaceDir = d.WorkspaceDir
	}
	if c.InputBundlePath == "" {
		c.InputBundlePath = d.InputBundlePath
	}
	if c.OutputDir == "" {
		c.OutputDir = d.OutputDir
	}
	if c.LeaseUpdatePath == "" {
		c.LeaseUpdatePath = d.LeaseUpdatePath
	}
	if c.EventLogPath == "" {
		c.EventLogPath = d.EventLogPath
	}
	if c.HomeDir == "" {
		c.HomeDir = d.HomeDir
	}
	if c.TempDir == "" {
		c.TempDir = d.TempDir
	}
	if c.KillGrace <= 0 {
		c.KillGrace = d.KillGrace
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = d.MaxOutputBytes
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = d.DrainGrace
	}
	if c.DrainLimit <= 0 {
		c.DrainLimit = d.DrainLimit
	}
	return c
}

// Main runs one attempt: it reads the start packet from stdin, streams
// runner events on stdout, writes diagnostics on stderr and returns the
// process exit code (ExitOK, ExitTaskFailed or ExitInternal). Cancelling
// ctx stops the task like a timeout; the result is still committed and
// written.
func Main(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, cfg Config) int {
	protectProcess()
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, stderr: &lockedWriter{w: stderr}, events: newEmitter(stdout, cfg.MaxOutputBytes)}
	pkt, err := readStartPacket(stdin, cfg)
	if err != nil {
		r.diag(err)
		return ExitInternal
	}
	r.pkt = pkt
	r.events.setKey(messages.EventKey(pkt.LeaseControlKey))
	if log := openEventLog(cfg.EventLogPath, r.stderr); log != nil {
		defer log.Close()
		r.events.setLog(log)
	}
	r.lease = r.newLeaseDeadline()
	code, err := r.execute(ctx)
	if err != nil {
		r.diag(err)
		return ExitInternal
	}
	return code
}

// run is the state of one worker run.
type run struct {
	cfg    Config
	pkt    *messages.StartPacket
	lease  *lease.Deadline // from the start packet, moved by lease updates
	events *emitter
	stderr io.Writer
	watch  *resourceWatch // the task's resources, while it runs
}

// diag writes one diagnostic line to stderr, prefixed with the failure
// code when err carries one.
func (r *run) diag(err error) {
	if failure.CodeOf(err) == "" {
		err = failure.Wrap(failure.SandboxWorkerFailed, err, "")
	}
	fmt.Fprintf(r.stderr, "forged worker: %v\n", err)
}

// note writes an informational line to stderr.
func (r *run) note(format string, args ...any) {
	fmt.Fprintf(r.stderr, "forged worker: "+format+"\n", args...)
}

// execute runs the attempt after the start packet was accepted. It returns
// the worker exit code, or an error when the worker failed internally (the
// caller then exits ExitInternal).
func (r *run) execute(ctx context.Context) (int, error) {
	id := r.pkt.Identity
	if err := clearOutputs(r.cfg.OutputDir); err != nil {
		return 0, err
	}
	r.events.lifecycle("worker_started", "worker started for attempt "+id.DispatchAttemptID,
		map[string]any{"dispatchAttemptId": id.DispatchAttemptID})

	ws, err := materialize(r.cfg, id)
	if err != nil {
		return 0, err
	}
	r.events.lifecycle("workspace_materialized",
		fmt.Sprintf("input %s checked out on %s", id.InputCommitSHA, id.Branch),
		map[string]any{"inputCommitSha": id.InputCommitSHA, "branch": id.Branch})

	dir, err := ws.resolveWorkingDir(r.cfg.WorkspaceDir, r.pkt.WorkingDirectory)
	if err != nil {
		return 0, err
	}
	if !r.renewLease() {
		return 0, failure.New(failure.SandboxLeaseExpired, "lease expired at %s before the task started",
			r.lease.ExpiresAt().UTC().Format(time.RFC3339))
	}

	// The OOM guards (oomguard_linux.go) run beside the task until
	// killStragglers ends them with its leftovers.
	guards := startOOMGuards(r.cfg.TaskShim, oomGuards)
	watch := startResourceWatch(guards, r.cfg.TempDir, r.cfg.WorkspaceDir)
	r.watch = watch
	outcome := r.runTask(ctx, dir)
	killStragglers()
	r.reportResources(watch.finish(!outcome.succeeded(), outcome.ExitCode))
	clearRelease(r.cfg.Released)

	result, err := ws.commitResult(id.DispatchAttemptID, r.pkt.Task, r.note)
	if err != nil {
		return 0, err
	}
	skipped := result.skipped
	for _, p := range skipped {
		r.note("not committed: git refuses the name %q", p)
	}
	var resultSHA *string
	if result.commit.IsZero() {
		r.events.lifecycle("result_unchanged", "the task changed nothing", nil)
	} else {
		s := result.commit.String()
		resultSHA = &s
		r.events.lifecycle("result_committed", fmt.Sprintf("result committed as %s (%d commit(s))", s, len(result.commits)),
			map[string]any{"resultCommitSha": s, "commitCount": len(result.commits), "commits": result.reportedCommits()})
	}

	code := ExitOK
	if !outcome.succeeded() {
		code = ExitTaskFailed
	}
	res := messages.ResultPacket{
		SchemaVersion:   1,
		ExitCode:        code,
		TaskExitCode:    outcome.ExitCode,
		Summary:         outcome.summary(resultSHA) + skippedSummary(skipped),
		ResultCommitSHA: resultSHA,
	}
	if err := writeOutputs(r.cfg.OutputDir, ws, r.pkt.Identity, result, res); err != nil {
		return 0, err
	}
	r.events.lifecycle("output_written", "manifest written", map[string]any{"exitCode": code})
	r.awaitHostRelease(ctx)
	return code, nil
}

// openEventLog creates (or empties) the event log, or returns nil when it
// is off or cannot be created: the run goes on without it, and only a
// re-adoption needs it.
func openEventLog(path string, stderr io.Writer) *os.File {
	if path == "-" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "forged worker: event log %s: %v (a restarted host cannot re-adopt this run)\n", path, err)
		return nil
	}
	return f
}

// skippedSummary mentions the paths left out of the result commit.
func skippedSummary(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d path(s) not committed because git refuses their names", len(skipped))
}

// lockedWriter serialises writes to the diagnostics stream, which the
// output pumps share with the main goroutine.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
