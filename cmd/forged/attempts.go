package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/kit/termsafe"
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
			query := url.Values{"state": {state}, "limit": {strconv.Itoa(limit)}}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://forged/v1/attempts?"+query.Encode(), nil)
			if err != nil {
				return err
			}
			res, err := unixClient(socket).Do(req)
			if err != nil {
				return fmt.Errorf("daemon at %s: %w", socket, err)
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
			if err != nil {
				return err
			}
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("daemon answered %s: %s", res.Status, termsafe.String(string(raw)))
			}
			var list httpapi.AttemptList
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("attempts: %w", err)
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
	cmd.Flags().StringVar(&state, "state", runner.StateAll, "running, finished or all")
	cmd.Flags().IntVar(&limit, "limit", httpapi.DefaultListLimit, fmt.Sprintf("at most this many, newest first (1 to %d)", httpapi.MaxListLimit))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

// printAttempts renders the attempts as a table, newest first.
func printAttempts(w io.Writer, attempts []runner.AttemptSummary) error {
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
