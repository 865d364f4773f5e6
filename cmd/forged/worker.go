package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/worker"
	"github.com/forgedev/forged/messages"
)

func workerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run inside a sandbox: read the start packet on stdin, run the task, write the output",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The host's release (messages.ReleaseSignal) is caught from
			// the start: its default action would end the worker.
			released := make(chan os.Signal, 1)
			signal.Notify(released, syscall.SIGUSR1)
			defer signal.Stop(released)
			cfg := worker.DefaultConfig()
			cfg.Released = released
			if code := worker.Main(ctx, os.Stdin, os.Stdout, os.Stderr, cfg); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "lease-update",
		Short: "Inside a sandbox: install the signed lease update read on stdin, atomically",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := worker.WriteLeaseUpdateFile(os.Stdin, messages.LeaseUpdatePath); err != nil {
				fmt.Fprintln(os.Stderr, "forged worker lease-update:", err)
				return exitError{1}
			}
			return nil
		},
	})
	cmd.AddCommand(probeCommand())
	return cmd
}

// probeCommand is the readiness probe a probe container runs on the
// attempt network: it speaks the service's own protocol until the service
// answers (exit 0) or its cap passes (exit 1, the last error on stderr).
func probeCommand() *cobra.Command {
	var t services.Target
	var within time.Duration
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Inside a probe container: wait until a service answers its protocol's readiness check",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := services.WaitReady(ctx, t, within, 250*time.Millisecond); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&t.Service, "service", "", "postgres, redis, browser or egress (the egress proxy)")
	f.StringVar(&t.Host, "host", "", "the service's host on the attempt network")
	f.IntVar(&t.Port, "port", 0, "the service's port")
	f.StringVar(&t.User, "user", "", "the connection user")
	f.StringVar(&t.Database, "database", "", "the connection database")
	f.StringVar(&t.PasswordFile, "password-file", "", "the password's file")
	f.DurationVar(&within, "within", time.Minute, "the probe's cap")
	return cmd
}
