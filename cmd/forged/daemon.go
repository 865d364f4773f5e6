package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/httpapi"
	"github.com/forgedev/forged/imagegc"
	"github.com/forgedev/forged/runner"
)

func daemonCommand() *cobra.Command {
	var flags runnerFlags
	var socket string
	var allowUIDs []uint
	var gc runner.ImageGCConfig
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Serve the forged HTTP API on a unix socket",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := newLogger(flags.logLevel())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := flags.config(logger)
			if err != nil {
				return err
			}
			if err := flags.publish.apply(&cfg); err != nil {
				return err
			}
			if gc.Interval > 0 {
				cfg.ImageGC = &gc
			}
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
			allowed := make([]uint32, 0, len(allowUIDs))
			for _, uid := range allowUIDs {
				if uid > math.MaxUint32 {
					return fmt.Errorf("--allow-uid %d is not a uid", uid)
				}
				allowed = append(allowed, uint32(uid))
			}
			l, err := httpapi.Listen(socket, httpapi.ListenOptions{
				AllowedUIDs: allowed,
				OnRefused: func(peer httpapi.PeerCred, err error) {
					logger.Warn("refused a connection to the daemon socket", "uid", peer.UID, "pid", peer.PID, "err", err)
				},
			})
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
	cmd.Flags().DurationVar(&gc.Interval, "image-gc-interval", 0, "run the image collector this often, and when the disk turns low (0: off)")
	cmd.Flags().IntVar(&gc.Policy.KeepPerProject, "image-gc-keep", 3, "image keys the collector keeps per project, newest first")
	cmd.Flags().DurationVar(&gc.Policy.MaxAge, "image-gc-max-age", 7*24*time.Hour, "older keys beyond the newest are collected")
	cmd.Flags().IntVar(&gc.Policy.AuditKeep, "image-gc-audit-keep", imagegc.DefaultAuditKeep, "image keys whose stored build logs the collector keeps, newest first")
	cmd.Flags().DurationVar(&gc.Policy.AuditMaxAge, "image-gc-audit-max-age", imagegc.DefaultAuditMaxAge, "stored build logs older than this are collected (at least 1h)")
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket path (default STATE_ROOT/forged.sock)")
	cmd.Flags().UintSliceVar(&allowUIDs, "allow-uid", nil, "uids, besides root and forged's own, whose processes may use the socket (checked with SO_PEERCRED; repeatable)")
	return cmd
}
