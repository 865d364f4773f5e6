package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/messages"
)

func eventsCommand() *cobra.Command {
	var socket string
	var after int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "events ATTEMPT_ID",
		Short: "Follow a daemon's attempt to its outcome, across restarts of the daemon; each event once, numbered",
		Long: "Follow an attempt's events through the daemon's socket, from the one after --after (the sequence number of the last\n" +
			"event seen; 0: from the first), then print its outcome. When the daemon restarts (a crash, an upgrade), it reconnects\n" +
			"and goes on after the last event it printed. Until Ctrl-C.\n" +
			"Exit status: 0 succeeded, 1 failed or refused, 3 cancelled, 4 teardown left resources behind.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd, 0)
			defer stop()
			daemon := client.New(socket)
			defer daemon.Close()
			outcome, err := followEvents(ctx, daemon, args[0], after, cmd.OutOrStdout(), asJSON)
			if err != nil {
				return daemonError(socket, err)
			}
			return exitError{exitStatus(outcome)}
		},
	}
	cmd.Flags().StringVar(&socket, "socket", filepath.Join(defaultStateRoot(), "forged.sock"), "the daemon's unix socket")
	cmd.Flags().IntVar(&after, "after", 0, "the sequence number of the last event already seen: print the events after it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the events and the outcome as the daemon's NDJSON stream lines")
	return cmd
}

// followEvents prints an attempt's events after the cursor, each with its
// sequence number, reconnecting across restarts of the daemon, then its
// outcome.
func followEvents(ctx context.Context, daemon *client.Client, attemptID string, after int, out io.Writer, asJSON bool) (messages.AttemptOutcome, error) {
	outcome, err := daemon.Follow(ctx, attemptID, after, func(seq int, ev messages.Event) error {
		if asJSON {
			return json.NewEncoder(out).Encode(messages.StreamLine{Type: messages.StreamLineEvent, Seq: seq, Event: &ev})
		}
		_, err := fmt.Fprintf(out, "%6d ", seq)
		printEvent(out, ev, false)
		return err
	})
	if err != nil {
		return outcome, err
	}
	if asJSON {
		return outcome, json.NewEncoder(out).Encode(messages.StreamLine{Type: messages.StreamLineFinished, Outcome: &outcome})
	}
	printOutcome(out, outcome, false)
	return outcome, nil
}
