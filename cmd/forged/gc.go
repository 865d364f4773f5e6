package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/sandbox/caches"
)

// gcReport is what `forged gc` prints: the image collection, with the
// cache volumes' beside it.
type gcReport struct {
	imagegc.Report
	Caches caches.GCReport `json:"caches"`
}

func gcCommand() *cobra.Command {
	var (
		dryRun    bool
		lockRoot  string
		project   string
		stateRoot string
		policy    imagegc.Policy
		cacheAge  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Remove the sandbox images forged no longer needs, and print the collection as JSON",
		Long: "Per project, keep the newest --keep image keys; remove the older ones past --max-age, and\n" +
			"forged's dangling images. An image a container uses is never removed. It takes the Docker\n" +
			"context lock, so it refuses to run beside a live forged (whose attempts' images it cannot see).\n" +
			"Without --project it also removes the stored build logs beyond --audit-keep keys or older than\n" +
			"--audit-max-age (never those of a key in use), and the package cache volumes (per-attempt and\n" +
			"project caches) older than --cache-max-age that no container uses. With --dry-run, only list\n" +
			"what would be removed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptible(cmd, 10*time.Minute)
			defer stop()
			engine, err := preflight.NewEngineClient("")
			if err != nil {
				return fmt.Errorf("docker client: %w", err)
			}
			defer engine.Close()
			lock, err := preflight.AcquireContextLock(lockRoot, engine.DaemonHost())
			if err != nil {
				return err
			}
			defer func() { _ = lock.Release() }()
			now := time.Now()
			images, err := imagegc.Collect(ctx, engine, imagegc.Request{Policy: policy, Now: now, DryRun: dryRun, Project: project, StateRoot: stateRoot})
			cacheReport, cacheErr := caches.Collect(ctx, engine, caches.GCRequest{MaxAge: cacheAge, Now: now, DryRun: dryRun, Project: project})
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if encodeErr := enc.Encode(gcReport{Report: images, Caches: cacheReport}); encodeErr != nil {
				return encodeErr
			}
			if cacheErr != nil {
				cacheErr = fmt.Errorf("cache volumes: %w", cacheErr)
			}
			return errors.Join(err, cacheErr)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().Bool("json", true, "print as JSON (the only format; accepted so that every printing command takes --json)")
	cmd.Flags().StringVar(&lockRoot, "lock-root", filepath.Join(os.TempDir(), "forged"), "where forged keeps the Docker context lock")
	cmd.Flags().StringVar(&project, "project", "", "only this project's images (its dev.forge.project label)")
	cmd.Flags().IntVar(&policy.KeepPerProject, "keep", 3, "image keys kept per project, newest first")
	cmd.Flags().DurationVar(&policy.MaxAge, "max-age", 7*24*time.Hour, "older keys beyond the newest are removed")
	cmd.Flags().StringVar(&stateRoot, "state-root", defaultStateRoot(), "forged's state directory, whose stored build logs are collected too (without --project)")
	cmd.Flags().DurationVar(&cacheAge, "cache-max-age", caches.DefaultMaxAge, "cache volumes created longer ago than this are removed (unless a container uses them)")
	cmd.Flags().IntVar(&policy.AuditKeep, "audit-keep", imagegc.DefaultAuditKeep, "image keys whose stored build logs are kept, newest first")
	cmd.Flags().DurationVar(&policy.AuditMaxAge, "audit-max-age", imagegc.DefaultAuditMaxAge, "stored build logs older than this are removed (at least 1h)")
	return cmd
}
