package main

import (
	"encoding/json"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/runner"
)

func reapCommand() *cobra.Command {
	var flags runnerFlags
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "reap [--dry-run]",
		Short: "Remove what crashed attempts of this runner left behind (one round), and print the round",
		Long: "Start forged without admitting anything, which reaps every ledger a dead forged left in the state\n" +
			"root, then run one reaper round over the engine's labelled resources and print it as JSON.\n" +
			"With --dry-run, only list what a round would remove (the start-up round is skipped).\n" +
			"It takes the Docker context lock, so it refuses to run beside a live forged.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptible(cmd, 10*time.Minute)
			defer stop()
			cfg, err := flags.config(newLogger(flags.logLevel()))
			if err != nil {
				return err
			}
			cfg.SkipStartupReap = dryRun
			r, err := runner.New(ctx, cfg)
			if err != nil {
				return err
			}
			defer r.Close()
			round, err := r.Reap(dryRun, nil)
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if encodeErr := enc.Encode(map[string]any{"startup": r.Restart, "round": round}); encodeErr != nil {
				return encodeErr
			}
			return err
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().Bool("json", true, "print as JSON (the only format; accepted so that every printing command takes --json)")
	return cmd
}
