package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

// Exit statuses of `forged run`.
const (
	exitSucceeded = 0
	exitFailed    = 1
	exitInvalid   = 2
	exitCancelled = 3
	exitDegraded  = 4
)

func runCommand() *cobra.Command {
	var flags runnerFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run DISPATCH.json",
		Short: "Run one sandbox attempt in-process and print its events",
		Long: "Run one sandbox attempt with an embedded actor system, printing its live events.\n" +
			"Exit status: 0 succeeded, 1 failed, 2 invalid dispatch or set-up, 3 cancelled, 4 teardown left resources behind.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := readDispatch(args[0])
			if err != nil {
				fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
				return exitError{exitInvalid}
			}
			ctx, stop := interruptible(cmd, 0)
			defer stop()
			cfg, err := flags.config(newLogger(flags.logLevel()))
			if err != nil {
				fmt.Fprintln(os.Stderr, "forged:", err)
				return exitError{exitInvalid}
			}
			if err := flags.publish.apply(&cfg); err != nil {
				fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
				return exitError{exitInvalid}
			}
			if cfg.Services, err = flags.preflight.services(); err != nil {
				fmt.Fprintln(os.Stderr, "forged:", err)
				return exitError{exitInvalid}
			}
			r, err := runner.New(ctx, cfg)
			if err != nil {
				fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
				return exitError{exitInvalid}
			}
			defer r.Close()
			reply, err := r.Submit(d)
			if err != nil {
				return err
			}
			if !reply.Accepted {
				fmt.Fprintf(os.Stderr, "forged: refused: %s: %s\n", termsafe.String(string(reply.Code)), termsafe.String(reply.Message))
				return exitError{exitFailed}
			}
			log, _ := r.Logs().Get(d.AttemptID())
			outcome := follow(ctx, stop, r, d.AttemptID(), log, os.Stdout, asJSON)
			return exitError{exitStatus(outcome)}
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events and the outcome as NDJSON")
	return cmd
}

func readDispatch(path string) (*messages.Dispatch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return messages.DecodeDispatch(f)
}

// follow prints the attempt's events until it finishes. The first signal
// cancels the attempt (teardown still runs) and restores the default
// signal handling through stopSignals, so that a second signal ends the
// process at once; the outcome is returned.
func follow(ctx context.Context, stopSignals func(), r *runner.Runner, attemptID string, log *runner.Log, out io.Writer, asJSON bool) messages.AttemptOutcome {
	next := 0
	cancelled := false
	for {
		events, outcome, end, changed := log.Read(next)
		for _, ev := range events {
			printEvent(out, ev, asJSON)
		}
		next = end
		if outcome != nil {
			printOutcome(out, *outcome, asJSON)
			return *outcome
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if !cancelled {
				cancelled = true
				stopSignals()
				fmt.Fprintln(os.Stderr, "forged: cancelling the attempt; tearing down")
				if _, err := r.Cancel(attemptID, "interrupted"); err != nil {
					fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
				}
			}
			select {
			case <-changed:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// printEvent prints one event: NDJSON, lossless, with --json; otherwise
// one line whose every field is escaped by termsafe, since roles, types
// and content may come from the task.
func printEvent(out io.Writer, ev messages.Event, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(out).Encode(map[string]any{"type": "event", "event": ev})
		return
	}
	marker := " "
	if ev.Kind == messages.KindError {
		marker = "!"
	}
	fmt.Fprintf(out, "%s %s %-6s %-32s %s\n", ev.OccurredAt.Local().Format("15:04:05.000"), marker, termsafe.String(ev.Role), termsafe.String(ev.EventType), termsafe.String(strings.TrimRight(ev.Content, "\n")))
}

func printOutcome(out io.Writer, o messages.AttemptOutcome, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(out).Encode(map[string]any{"type": "finished", "outcome": o})
		return
	}
	fmt.Fprintf(out, "\nattempt %s %s", termsafe.String(o.AttemptID), termsafe.String(o.Status))
	if o.Code != "" {
		fmt.Fprintf(out, " (%s)", termsafe.String(o.Code))
	}
	fmt.Fprintln(out)
	if o.Message != "" {
		fmt.Fprintf(out, "  %s\n", termsafe.String(o.Message))
	}
	if o.ResultCommitSHA != "" {
		fmt.Fprintf(out, "  result commit: %s\n", termsafe.String(o.ResultCommitSHA))
	}
	if o.ResultCommitCount > 0 {
		fmt.Fprintf(out, "  commits:       %d\n", o.ResultCommitCount)
		for _, c := range o.ResultCommits { // subjects are made printable by the host
			fmt.Fprintf(out, "    %.12s %s\n", c.SHA, c.Subject)
		}
	}
	if w := o.WorktreeLeft; w != nil {
		fmt.Fprintf(out, "  worktree left: %s (%s)\n", w.Path, w.Reason)
	}
	if o.Isolation != "" {
		isolation := termsafe.String(o.Isolation)
		if o.WorkerRuntime != "" {
			isolation += " (runtime " + termsafe.String(o.WorkerRuntime) + ")"
		}
		fmt.Fprintf(out, "  isolation:     %s\n", isolation)
	}
	if o.PeakMemoryBytes > 0 {
		fmt.Fprintf(out, "  peak memory:   %.1f MiB\n", float64(o.PeakMemoryBytes)/(1<<20))
	}
	if o.Cleanup != nil {
		removed := 0
		for _, a := range o.Cleanup.Actions {
			if a.Outcome == "removed" {
				removed++
			}
		}
		remaining := fmt.Sprint(o.Cleanup.Remaining)
		if o.Cleanup.RemainingUnknown {
			remaining = "unknown (the engine could not be listed)"
		}
		fmt.Fprintf(out, "  teardown:      %d resources removed, %s remaining\n", removed, remaining)
	}
}

func exitStatus(o messages.AttemptOutcome) int {
	switch {
	case o.Degraded:
		return exitDegraded
	case o.Status == messages.StatusSucceeded:
		return exitSucceeded
	case o.Status == messages.StatusCancelled:
		return exitCancelled
	default:
		return exitFailed
	}
}
