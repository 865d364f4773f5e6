package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

func attemptsCommand() *cobra.Command {
	var socket, state string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "attempts",
		Short: "List a running daemon's attempts: running ones, and finished ones still retained (256 at most, for an hour)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			list, err := client.New(socket).Attempts(ctx, state, limit)
			if err != nil {
				return daemonError(socket, err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			return printAttempts(cmd.OutOrStdout(), list.Attempts)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", filepath.Join(defaultStateRoot(), "forged.sock"), "the daemon's unix socket")
	cmd.Flags().StringVar(&state, "state", messages.AttemptStateAll, "running, finished or all")
	cmd.Flags().IntVar(&limit, "limit", messages.DefaultAttemptListLimit, fmt.Sprintf("at most this many, newest first (1 to %d)", messages.MaxAttemptListLimit))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

// printAttempts renders the attempts as a table, newest first.
func printAttempts(w io.Writer, attempts []messages.AttemptSummary) error {
	if len(attempts) == 0 {
		_, err := fmt.Fprintln(w, "no attempts")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tSTATE\tSTATUS\tCODE\tPHASE\tSUBMITTED\tFINISHED\tEVENTS")
	for _, a := range attempts {
		status, code, phase, finished := "-", "-", "-", "-"
		if o := a.Outcome; o != nil {
			status, phase = o.Status, orDash(o.Phase)
			code = orDash(o.Code)
			if !o.FinishedAt.IsZero() {
				finished = o.FinishedAt.Local().Format(time.DateTime)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", termsafe.String(a.AttemptID), a.State, termsafe.String(status), termsafe.String(code),
			termsafe.String(phase), a.SubmittedAt.Local().Format(time.DateTime), finished, a.Events)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// daemonError renders a failed request to the daemon: its refusal, or why
// the socket could not be reached, escaped by termsafe (the daemon's
// message may carry text a task chose).
func daemonError(socket string, err error) error {
	var refused *client.Error
	if errors.As(err, &refused) {
		return errors.New(termsafe.String(refused.Error()))
	}
	return fmt.Errorf("daemon at %s: %w", socket, err)
}
