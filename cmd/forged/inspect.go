package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

func inspectCommand() *cobra.Command {
	var socket string
	var asJSON, watch bool
	var interval time.Duration
	var memberID string
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Print a running daemon's live actor tree: every actor's kind, phase and key facts (--watch: live)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			daemon := client.New(socket)
			if watch {
				ctx, stop := interruptible(cmd, 0)
				defer stop()
				if memberID != "" {
					return watchMember(ctx, daemon, socket, memberID, interval, cmd.OutOrStdout(), asJSON, isTerminal(os.Stdout))
				}
				return watchInspect(ctx, daemon, interval, cmd.OutOrStdout(), asJSON, isTerminal(os.Stdout))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			var tree []messages.InspectReply
			var err error
			if memberID != "" {
				tree, err = daemon.InspectMember(ctx, memberID)
			} else {
				tree, err = daemon.Inspect(ctx)
			}
			if err != nil {
				return daemonError(socket, err)
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(tree)
			}
			printTree(os.Stdout, tree)
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", filepath.Join(defaultStateRoot(), "forged.sock"), "the daemon's unix socket")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the replies as JSON (with --watch: one console frame per line)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the daemon live: redraw the tree (with each actor's mailbox, messages and restarts) and the attempts in place")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with --watch, how often the daemon sends a frame (with --member: how often the member's tree is read)")
	cmd.Flags().StringVar(&memberID, "member", "", "show the tree of the fleet member with this runner id instead, read through the daemon (a member of the fleet; see `forged fleet`); with --watch it is read again every --interval")
	return cmd
}

// printTree renders the actors as an indented tree, children under their
// parent, each with its kind, phase and facts, every field escaped by
// termsafe (facts carry container names, messages and other text the
// engine or a task may have chosen).
func printTree(w io.Writer, replies []messages.InspectReply) { printTreeWith(w, replies, nil) }

// printTreeWith is printTree with extra text (already escaped) after each
// actor's facts.
func printTreeWith(w io.Writer, replies []messages.InspectReply, extra func(pid string) string) {
	byPID := make(map[string]messages.InspectReply, len(replies))
	for _, r := range replies {
		byPID[r.PID] = r
	}
	var walk func(pid string, depth int)
	walk = func(pid string, depth int) {
		r, ok := byPID[pid]
		if !ok {
			return
		}
		keys := make([]string, 0, len(r.Facts))
		for k, v := range r.Facts {
			if v != "" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		facts := make([]string, 0, len(keys))
		for _, k := range keys {
			facts = append(facts, termsafe.String(k)+"="+termsafe.String(r.Facts[k]))
		}
		if extra != nil {
			if more := extra(pid); more != "" {
				facts = append(facts, more)
			}
		}
		fmt.Fprintf(w, "%s%s [%s] %s  %s\n", strings.Repeat("  ", depth), termsafe.String(r.Kind), termsafe.String(r.Phase), termsafe.String(pid), strings.Join(facts, " "))
		for _, child := range r.Children {
			walk(child, depth+1)
		}
	}
	if len(replies) > 0 {
		walk(replies[0].PID, 0)
	}
}
