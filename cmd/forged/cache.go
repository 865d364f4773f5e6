package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/sandbox/caches"
)

func cacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Operator commands for the contracts' package caches",
	}
	cmd.AddCommand(cacheWarmCommand())
	return cmd
}

func cacheWarmCommand() *cobra.Command {
	var req caches.WarmRequest
	cmd := &cobra.Command{
		Use:   "warm --project P --cache NAME --image IMAGE [--network none|bridge] -- COMMAND [ARG]...",
		Short: "Fill a project's read-only cache by running COMMAND in a toolchain image",
		Long: "Creates the project's read-only cache volume if it does not exist and runs COMMAND in IMAGE\n" +
			"(never pulled) with the volume mounted read-write where the worker sees it, and the tool's\n" +
			"variables set. The command runs as root inside a container with every capability dropped, a\n" +
			"read-only root filesystem and no network unless --network bridge, so the worker can read the\n" +
			"files and never write them. Attempts mount the volume read-only. The command's output goes to\n" +
			"stderr; the report, as JSON, to stdout.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd, 0)
			defer stop()
			engine, err := preflight.NewEngineClient("")
			if err != nil {
				return fmt.Errorf("docker client: %w", err)
			}
			defer engine.Close()
			req.Command, req.Output = args, cmd.ErrOrStderr()
			report, err := caches.Warm(ctx, engine, req)
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if encodeErr := enc.Encode(report); encodeErr != nil {
				return encodeErr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&req.Project, "project", "", "the project whose cache this is (the dispatches' repo.name)")
	cmd.Flags().StringVar(&req.Cache, "cache", "", "npm, pnpm, yarn, nuget, cargo or pip")
	cmd.Flags().StringVar(&req.Image, "image", "", "the toolchain image the command runs in (present locally)")
	cmd.Flags().StringVar(&req.Network, "network", "none", "none, or bridge for a command that downloads")
	cmd.Flags().DurationVar(&req.Timeout, "timeout", caches.DefaultWarmTimeout, "deadline of the whole warm-up")
	cmd.Flags().Int64Var(&req.MemoryBytes, "memory-bytes", caches.DefaultWarmMemoryBytes, "memory limit of the warm-up container")
	for _, f := range []string{"project", "cache", "image"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}
