package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/forgedev/forged/internal/sandbox/services/probe"
	"github.com/forgedev/forged/messages"
)

// ExitUsage is the exit status of a command line the worker binary does not
// accept.
const ExitUsage = 2

// probeInterval is the pause between two readiness probes.
const probeInterval = 250 * time.Millisecond

// Command runs the worker binary's command line (args without the program
// name) and returns the process exit status. The first argument is always
// "worker", as in every command line the host writes into a container
// (messages.WorkerBinaryPath followed by "worker"):
//
//	worker                the container's entrypoint: Main, with SIGINT and
//	                      SIGTERM cancelling it and the host's release
//	                      (messages.ReleaseSignal) caught from the start
//	worker lease-update   install the signed lease update read on stdin
//	                      (WriteLeaseUpdateFile, run by docker exec)
//	worker probe FLAGS    wait until a service answers its protocol's
//	                      readiness check (package probe), in a probe
//	                      container on the attempt network
//	worker task-exec PATH ARGV...
//	                      the task shim the worker starts the task through
//	                      (TaskExec, the exit watch); it execs PATH
//	worker oom-guard      a process the OOM killer takes instead of the
//	                      worker while its killed task drains (OOMGuard)
//
// A command line it does not accept exits ExitUsage.
func Command(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "worker" {
		fmt.Fprintln(stderr, "forged-worker: usage: forged-worker worker [lease-update | probe FLAGS]")
		return ExitUsage
	}
	args = args[1:]
	if len(args) == 0 {
		return entrypoint(stdin, stdout, stderr)
	}
	switch args[0] {
	case "lease-update":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "forged-worker: worker lease-update takes no arguments, got %q\n", args[1:])
			return ExitUsage
		}
		if err := WriteLeaseUpdateFile(stdin, messages.LeaseUpdatePath); err != nil {
			fmt.Fprintln(stderr, "forged worker lease-update:", err)
			return 1
		}
		return 0
	case "probe":
		return probeCommand(args[1:], stderr)
	case TaskExecCommand:
		if len(args) < 3 {
			fmt.Fprintln(stderr, "forged-worker: usage: forged-worker worker task-exec PATH ARGV0 [ARGS...]")
			return ExitUsage
		}
		return TaskExec(args[1], args[2:])
	case OOMGuardCommand:
		if len(args) > 1 {
			fmt.Fprintf(stderr, "forged-worker: worker %s takes no arguments, got %q\n", OOMGuardCommand, args[1:])
			return ExitUsage
		}
		return OOMGuard()
	}
	fmt.Fprintf(stderr, "forged-worker: unknown command %q for worker\n", args[0])
	return ExitUsage
}

// entrypoint is the container's entrypoint: one attempt (Main).
func entrypoint(stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The host's release (messages.ReleaseSignal) is caught from the
	// start: its default action would end the worker.
	released := make(chan os.Signal, 1)
	signal.Notify(released, syscall.SIGUSR1)
	defer signal.Stop(released)
	cfg := DefaultConfig()
	cfg.Released = released
	if exe, err := os.Executable(); err == nil {
		cfg.TaskShim = exe
	}
	return Main(ctx, stdin, stdout, stderr, cfg)
}

// probeFlags parses `worker probe`'s flags (see services.Definition's
// ProbeArgs for the host's side).
func probeFlags(args []string, stderr io.Writer) (probe.Target, time.Duration, error) {
	var t probe.Target
	var within time.Duration
	f := flag.NewFlagSet("forged-worker worker probe", flag.ContinueOnError)
	f.SetOutput(stderr)
	f.StringVar(&t.Service, "service", "", "postgres, redis, browser or egress (the egress proxy)")
	f.StringVar(&t.Host, "host", "", "the service's host on the attempt network")
	f.IntVar(&t.Port, "port", 0, "the service's port")
	f.StringVar(&t.User, "user", "", "the connection user")
	f.StringVar(&t.Database, "database", "", "the connection database")
	f.StringVar(&t.PasswordFile, "password-file", "", "the password's file")
	f.DurationVar(&within, "within", time.Minute, "the probe's cap")
	if err := f.Parse(args); err != nil {
		return t, 0, err
	}
	if f.NArg() > 0 {
		return t, 0, fmt.Errorf("worker probe takes no arguments, got %q", f.Args())
	}
	return t, within, nil
}

// probeCommand probes until the service answers (exit 0) or the cap passes
// (exit 1, the last error on stderr).
func probeCommand(args []string, stderr io.Writer) int {
	t, within, err := probeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "forged-worker:", err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := probe.WaitReady(ctx, t, within, probeInterval); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
