package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/worker"
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
			if code := worker.Main(ctx, os.Stdin, os.Stdout, os.Stderr, worker.DefaultConfig()); code != 0 {
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
	cmd.AddCommand(&cobra.Command{
		Use:   "release",
		Short: "Inside a sandbox: release the worker once the host took its last reading",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := worker.WriteReleaseFile(messages.ReleasePath); err != nil {
				fmt.Fprintln(os.Stderr, "forged worker release:", err)
				return exitError{1}
			}
			return nil
		},
	})
	return cmd
}
