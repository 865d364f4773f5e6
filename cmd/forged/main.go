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

	"github.com/forgedev/forged/internal/termsafe"
)

// exitError carries a process exit status out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	root := &cobra.Command{
		Use:           "forged",
		Short:         "Run sandbox attempts in hardened Docker containers, supervised as actor trees",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCommand(), daemonCommand(), workerCommand(), exampleCommand(), preflightCommand(), leaseCommand(), reapCommand(), inspectCommand(), gcCommand())
	if err := root.Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "forged:", termsafe.String(err.Error()))
		os.Exit(2)
	}
}

// newLogger logs with tint on a terminal, every string escaped by
// termsafe, and JSON otherwise.
func newLogger(level slog.Level) *slog.Logger {
	if info, err := os.Stderr.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
		return slog.New(termsafe.Handler(tint.NewHandler(os.Stderr, &tint.Options{Level: level})))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
