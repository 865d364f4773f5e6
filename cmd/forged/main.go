// Command forged runs untrusted coding-agent jobs in hardened Docker
// sandboxes, supervised as actor trees. See the README for the commands.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/lmittmann/tint"
	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/kit/termsafe"
)

// version is forged's release, stamped at build time with
// -ldflags "-X main.version=...". The worker is a binary of its own
// (cmd/forged-worker) and is never stamped, so a new version of the
// daemon keeps every cached sandbox image.
var version = "dev"

// exitError carries a process exit status out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	if err := newRootCommand(os.LookupEnv).Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
		os.Exit(2)
	}
}

// newRootCommand builds forged's commands. Every command reads its flags'
// values also from FORGED_* environment variables and the configuration
// file (package config), under its command line.
func newRootCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	layer := &configLayer{lookupEnv: lookupEnv}
	root := &cobra.Command{
		Use:               "forged",
		Version:           version,
		Short:             "Run sandbox attempts in hardened Docker containers, supervised as actor trees",
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: layer.preRun,
	}
	layer.root = root
	root.PersistentFlags().StringVar(&layer.path, "config", "", "YAML configuration file (env "+configEnv+"); flags win over FORGED_* variables, which win over the file")
	root.AddCommand(runCommand(), daemonCommand(), exampleCommand(), preflightCommand(), leaseCommand(), reapCommand(), inspectCommand(), gcCommand(), cacheCommand(), attemptsCommand(), eventsCommand(), fleetCommand(), configCommand(layer))
	layer.describeEnv(root)
	return root
}

// newLogger logs with tint on a terminal, every string escaped by
// termsafe, and JSON otherwise.
func newLogger(level slog.Level) *slog.Logger {
	if info, err := os.Stderr.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
		return slog.New(termsafe.Handler(tint.NewHandler(os.Stderr, &tint.Options{Level: level})))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
