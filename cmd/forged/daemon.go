package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/httpapi"
	"github.com/forgedev/forged/runner"
)

func daemonCommand() *cobra.Command {
	var flags runnerFlags
	var socket string
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Serve the forged HTTP API on a unix socket",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := newLogger(flags.logLevel())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := flags.config(logger)
			if err := flags.publish.apply(&cfg); err != nil {
				return err
			}
			var err error
			if cfg.Services, err = flags.preflight.services(); err != nil {
				return err
			}
			r, err := runner.New(ctx, cfg)
			if err != nil {
				return err
			}
			defer r.Close()
			if socket == "" {
				socket = filepath.Join(flags.stateRoot, "forged.sock")
			}
			l, err := httpapi.Listen(socket)
			if err != nil {
				return err
			}
			logger.Warn("forged daemon listening", "socket", socket)
			fmt.Fprintf(os.Stderr, "forged: listening on %s\n", socket)
			serveErr := httpapi.Serve(ctx, l, httpapi.Handler(r, logger), 10*time.Second)
			// The first signal stopped admission (the API is closed); a
			// second one now ends the process at once, leaving the rest to
			// the next start's reaper. Cancel what runs and let every
			// attempt tear down before the actor system stops.
			stop()
			drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
			defer cancel()
			if err := r.Drain(drainCtx, "the daemon is shutting down"); err != nil {
				logger.Error("drain incomplete; the next start's reaper removes what remains", "err", err)
			}
			return serveErr
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket path (default STATE_ROOT/forged.sock)")
	return cmd
}
