package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

// Terminal control sequences of the watch: home the cursor and clear the
// screen before each frame, so that it redraws in place.
const (
	redraw = "\x1b[H\x1b[2J"
)

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// watchInspect follows /v1/inspect/stream until ctx ends: on a terminal it
// redraws each frame in place; otherwise it prints frames one after the
// other; with asJSON it prints each frame as one JSON line, as the daemon
// sent it.
func watchInspect(ctx context.Context, daemon *client.Client, interval time.Duration, out io.Writer, asJSON, terminal bool) error {
	err := daemon.Frames(ctx, interval, func(frame messages.ConsoleFrame, raw json.RawMessage) error {
		if asJSON {
			_, err := fmt.Fprintln(out, string(raw))
			return err
		}
		var buf bytes.Buffer
		if terminal {
			buf.WriteString(redraw)
		}
		printFrame(&buf, frame)
		if !terminal {
			buf.WriteString("\n")
		}
		_, err := out.Write(buf.Bytes())
		return err
	})
	var refused *client.Error
	switch {
	case err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled):
		return nil
	case errors.As(err, &refused):
		return errors.New(termsafe.String(refused.Error()))
	default:
		return fmt.Errorf("daemon: %w", err)
	}
}

// printFrame renders one console frame: a summary line, the actor tree
// with each actor's counters, and the newest attempts with their phase
// timelines. Every daemon string is escaped by termsafe.
func printFrame(w io.Writer, frame messages.ConsoleFrame) {
	head := "forged  " + frame.At.Local().Format("15:04:05")
	if s := frame.Snapshot; s != nil {
		head += fmt.Sprintf("  slots %d/%d  queued %d  build queue %d  degraded %d", len(s.Attempts), s.Slots, s.Queued, s.BuildQueue, s.Degraded)
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w)
	replies := make([]messages.InspectReply, 0, len(frame.Actors))
	stats := make(map[string]string, len(frame.Actors))
	for _, a := range frame.Actors {
		replies = append(replies, a.InspectReply)
		if s := a.Stats; s != nil {
			stats[a.PID] = fmt.Sprintf("| mailbox=%d in=%d out=%d restarts=%d", s.MailboxDepth, s.MessagesIn, s.MessagesOut, s.Restarts)
		}
	}
	printTreeWith(w, replies, func(pid string) string { return stats[pid] })
	if len(frame.Attempts) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "attempts (newest first)")
	for _, a := range frame.Attempts {
		status := a.State
		if o := a.Outcome; o != nil {
			status = o.Status
			if o.Code != "" {
				status += " (" + o.Code + ")"
			}
		}
		spans := make([]string, 0, len(a.Timeline))
		for _, s := range a.Timeline {
			if s.Seconds > 0 {
				spans = append(spans, fmt.Sprintf("%s %.1fs", s.Phase, s.Seconds))
			} else {
				spans = append(spans, s.Phase+" …")
			}
		}
		fmt.Fprintf(w, "  %s  %s  %s\n", termsafe.String(a.AttemptID), termsafe.String(status), termsafe.String(strings.Join(spans, " → ")))
	}
}
