package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

// memberFrame is one reading of another fleet member's tree, as
// `forged inspect --watch --member --json` prints it (one per line).
// Error is set, and Actors empty, when that reading failed.
type memberFrame struct {
	At     time.Time               `json:"at"`
	Member string                  `json:"member"`
	Actors []messages.InspectReply `json:"actors"`
	Error  string                  `json:"error,omitempty"`
}

// watchMember follows another member's tree, read through the daemon
// (GET /v1/fleet/members/ID/inspect) every interval, until ctx ends. The
// cluster carries no stream of another member's frames, so this polls,
// and shows the tree without the mailbox counters a local watch has. A
// first reading that fails ends the watch with its error (a runner id no
// member has, a daemon outside a fleet); a later one is shown in place of
// the tree, and the watch goes on (the member may be restarting).
func watchMember(ctx context.Context, daemon *client.Client, socket, runnerID string, interval time.Duration, out io.Writer, asJSON, terminal bool) error {
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for first := true; ; first = false {
		rctx, cancel := context.WithTimeout(ctx, max(interval, 30*time.Second))
		tree, err := daemon.InspectMember(rctx, runnerID)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && first {
			return daemonError(socket, err)
		}
		frame := memberFrame{At: time.Now(), Member: runnerID, Actors: tree}
		if err != nil {
			frame.Error = err.Error()
		}
		if err := writeMemberFrame(out, frame, asJSON, terminal); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writeMemberFrame prints one reading: a JSON line, or a header and the
// tree (redrawn in place on a terminal); every daemon string is escaped by
// termsafe.
func writeMemberFrame(out io.Writer, frame memberFrame, asJSON, terminal bool) error {
	if asJSON {
		line, err := json.Marshal(frame)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(line))
		return err
	}
	var buf bytes.Buffer
	if terminal {
		buf.WriteString(redraw)
	}
	fmt.Fprintf(&buf, "forged member %s  %s\n\n", termsafe.String(frame.Member), frame.At.Local().Format("15:04:05"))
	if frame.Error != "" {
		fmt.Fprintf(&buf, "unreachable: %s\n", termsafe.String(frame.Error))
	} else {
		printTree(&buf, frame.Actors)
	}
	if !terminal {
		buf.WriteString("\n")
	}
	_, err := out.Write(buf.Bytes())
	return err
}
