package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// forgedFlags are the flags every forged process of the benchmark gets: the
// machine's engine is rootful and has two cores, all of them for attempts;
// the isolation floor is the run's (Config.Isolation, "" the default).
func (e *Env) forgedFlags(stateRoot string, slots, queue int) []string {
	flags := []string{"--allow-rootful", "--host-reserved-cores", "0",
		"--state-root", stateRoot, "--slots", strconv.Itoa(slots), "--queue", strconv.Itoa(queue)}
	if e.cfg.Isolation != "" {
		flags = append(flags, "--isolation", e.cfg.Isolation)
	}
	return flags
}

// benchCPUMillis is every benchmark dispatch's CPU request: admission
// budgets the host's cores, and three attempts of 500 millis fit in two
// cores where three of the example's 1000 do not (B2 runs at capacity 3).
// The seed CLI and the floor give their workers the same CPU limit.
const benchCPUMillis = 500

// forgedCommand prepares a forged process for a state root. Its TMPDIR is
// the state root's own, so its one-forged-per-context lock meets neither
// the benchmark's other forged processes nor another forged on the host.
func (e *Env) forgedCommand(ctx context.Context, stateRoot string, args ...string) (*exec.Cmd, error) {
	return e.forgedCommandOf(ctx, e.cfg.ForgedBinary, stateRoot, args...)
}

// forgedCommandOf is forgedCommand for another forged binary (B8's
// upgraded build).
func (e *Env) forgedCommandOf(ctx context.Context, binary, stateRoot string, args ...string) (*exec.Cmd, error) {
	tmp := stateRoot + "-tmp"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}

// newDispatch returns a dispatch of the trivial task for the state root's
// runner, on a managed branch of its own (concurrent attempts on one
// branch would conflict by design).
func (e *Env) newDispatch(stateRoot string, argv []string, lease time.Duration) (*messages.Dispatch, error) {
	runnerID, err := runner.LoadRunnerID(stateRoot)
	if err != nil {
		return nil, err
	}
	e.noteRunner(runnerID, filepath.Base(stateRoot))
	d, err := example.NewDispatch(example.DispatchOptions{Project: e.project, RunnerID: runnerID, RepoPath: e.repo, Argv: argv, Lease: lease})
	if err != nil {
		return nil, err
	}
	d.Lease.WorktreeKey = "forge/bench-" + d.Sandbox.DispatchAttemptID[:8]
	d.Sandbox.RequestedResources.CPUMillis = benchCPUMillis
	return d, nil
}

// forgedRun runs one `forged run --json` of the trivial task and returns
// its wall time and printed outcome.
func (e *Env) forgedRun(ctx context.Context, stateRoot string) (time.Duration, runOutput, error) {
	d, err := e.newDispatch(stateRoot, nil, 0)
	if err != nil {
		return 0, runOutput{}, err
	}
	path := filepath.Join(e.cfg.WorkDir, "dispatch-"+d.AttemptID()+".json")
	if err := example.WriteDispatch(path, d); err != nil {
		return 0, runOutput{}, err
	}
	defer os.Remove(path)
	args := append([]string{"run", "--json"}, e.forgedFlags(stateRoot, 1, 0)...)
	cmd, err := e.forgedCommand(ctx, stateRoot, append(args, path)...)
	if err != nil {
		return 0, runOutput{}, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	out := parseRunOutput(stdout.Bytes())
	if err != nil {
		return elapsed, out, fmt.Errorf("forged run: %w: %s", err, text.EllipsisTail(stderr.String()+stdout.String(), 2000))
	}
	if out.Outcome == nil || out.Outcome.Status != messages.StatusSucceeded {
		return elapsed, out, fmt.Errorf("forged run did not succeed: %s", text.EllipsisTail(stdout.String(), 2000))
	}
	return elapsed, out, nil
}

// runOutput is what `forged run --json` printed.
type runOutput struct {
	Events  []messages.Event
	Outcome *messages.AttemptOutcome
}

func parseRunOutput(raw []byte) runOutput {
	var out runOutput
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line messages.StreamLine
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Event != nil {
			out.Events = append(out.Events, *line.Event)
		}
		if line.Outcome != nil {
			out.Outcome = line.Outcome
		}
	}
	return out
}

// imageID returns the sandbox image forged reported.
func (o runOutput) imageID() (string, error) {
	for _, ev := range o.Events {
		if (ev.EventType != "sandbox_image_built" && ev.EventType != "sandbox_image_cache_hit") || ev.Data == nil {
			continue
		}
		var data struct {
			ImageDigest string `json:"imageDigest"`
		}
		if err := json.Unmarshal([]byte(*ev.Data), &data); err != nil {
			return "", err
		}
		return data.ImageDigest, nil
	}
	return "", errors.New("forged reported no image event")
}

// daemon is a running `forged daemon` and a client of its socket.
type daemon struct {
	cmd       *exec.Cmd
	api       *client.Client
	stateRoot string
	done      chan error
}

// startDaemon starts forged daemon and waits until its socket answers.
func (e *Env) startDaemon(ctx context.Context, stateRoot string, slots, queue int) (*daemon, error) {
	return e.startDaemonWith(ctx, stateRoot, e.cfg.ForgedBinary, slots, queue)
}

// startDaemonWith is startDaemon for a forged binary, with extra flags.
func (e *Env) startDaemonWith(ctx context.Context, stateRoot, binary string, slots, queue int, extra ...string) (*daemon, error) {
	socket := filepath.Join(stateRoot, "forged.sock")
	args := append(append([]string{"daemon", "--socket", socket}, e.forgedFlags(stateRoot, slots, queue)...), extra...)
	cmd, err := e.forgedCommandOf(context.WithoutCancel(ctx), binary, stateRoot, args...)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(e.cfg.WorkDir, "daemon-"+filepath.Base(stateRoot)+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	d := &daemon{cmd: cmd, stateRoot: stateRoot, done: make(chan error, 1), api: client.New(socket)}
	go func() { d.done <- cmd.Wait(); logFile.Close() }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := d.api.Snapshot(ctx); err == nil {
			return d, nil
		}
		select {
		case err := <-d.done:
			d.done <- err
			return nil, fmt.Errorf("forged daemon exited at start: %v (log %s)", err, logFile.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = d.stop()
			return nil, errors.New("forged daemon did not answer within a minute")
		}
	}
}

// submit posts a dispatch; it must be admitted.
func (d *daemon) submit(ctx context.Context, dispatch *messages.Dispatch) error {
	if _, err := d.api.Submit(ctx, dispatch); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// cancel asks the daemon to cancel an attempt; whether it still knew the
// attempt does not matter.
func (d *daemon) cancel(ctx context.Context, attemptID string) error {
	err := d.api.Cancel(ctx, attemptID)
	var refused *client.Error
	if errors.As(err, &refused) {
		return nil
	}
	return err
}

// outcome follows an attempt's event stream to its outcome.
func (d *daemon) outcome(ctx context.Context, attemptID string) (messages.AttemptOutcome, error) {
	out, _, err := d.follow(ctx, attemptID)
	return out, err
}

// follow reads an attempt's event stream to its outcome, and returns its
// events too.
func (d *daemon) follow(ctx context.Context, attemptID string) (messages.AttemptOutcome, []messages.Event, error) {
	var events []messages.Event
	out, err := d.api.Events(ctx, attemptID, func(ev messages.Event) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		return messages.AttemptOutcome{}, events, fmt.Errorf("events of %s ended without an outcome: %w", attemptID, err)
	}
	return out, events, nil
}

// runAttempt submits a dispatch and waits for its outcome, which must be a
// success; it returns the time from the POST to the outcome and the
// attempt's timeline (each event's time since the POST).
func (d *daemon) runAttempt(ctx context.Context, dispatch *messages.Dispatch) (time.Duration, []TimelineStep, error) {
	start := time.Now()
	if err := d.submit(ctx, dispatch); err != nil {
		return 0, nil, err
	}
	out, events, err := d.follow(ctx, dispatch.AttemptID())
	elapsed := time.Since(start)
	if err != nil {
		return elapsed, nil, err
	}
	if out.Status != messages.StatusSucceeded {
		return elapsed, nil, fmt.Errorf("attempt %s %s: %s: %s", out.AttemptID, out.Status, out.Code, out.Message)
	}
	timeline := make([]TimelineStep, 0, len(events)+1)
	for _, ev := range events {
		timeline = append(timeline, TimelineStep{Event: ev.EventType, AtMillis: msSince(start, ev.OccurredAt)})
	}
	timeline = append(timeline, TimelineStep{Event: "finished (outcome received)", AtMillis: msSince(start, start.Add(elapsed))})
	return elapsed, timeline, nil
}

// TimelineStep is one event of an attempt, at its time since the POST.
type TimelineStep struct {
	Event    string  `json:"event"`
	AtMillis float64 `json:"atMs"`
}

func msSince(start, t time.Time) float64 { return float64(t.Sub(start).Microseconds()) / 1000 }

// pid is the daemon's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop sends SIGTERM (the daemon drains and tears its attempts down) and
// waits; after two minutes it kills the process.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		return err
	case <-time.After(2 * time.Minute):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("forged daemon did not stop within 2 minutes; killed: %v", <-d.done)
	}
}
