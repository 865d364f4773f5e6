package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/kit/termsafe"
	"github.com/forgedev/forged/messages"
)

func leaseCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "lease", Short: "Manage the leases of a running daemon's attempts"}
	var socket, token, expires string
	var asJSON bool
	renew := &cobra.Command{
		Use:   "renew ATTEMPT_ID --fencing-token TOKEN --expires-at RFC3339",
		Short: "Extend a running attempt's lease through the daemon",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			expiresAt, err := time.Parse(time.RFC3339Nano, expires)
			if err != nil {
				return fmt.Errorf("--expires-at: %w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			reply, err := client.New(socket).RenewLease(ctx, args[0], token, expiresAt)
			var refused *client.Error
			if err != nil && !errors.As(err, &refused) {
				return fmt.Errorf("daemon at %s: %w", socket, err)
			}
			if asJSON {
				if err := printRenewalJSON(cmd.OutOrStdout(), reply, refused); err != nil {
					return err
				}
			} else {
				printRenewal(cmd.OutOrStdout(), args[0], reply, refused)
			}
			if refused != nil {
				return exitError{1}
			}
			return nil
		},
	}
	renew.Flags().BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON")
	renew.Flags().StringVar(&socket, "socket", filepath.Join(defaultStateRoot(), "forged.sock"), "the daemon's unix socket")
	renew.Flags().StringVar(&token, "fencing-token", "", "the attempt's fencing token")
	renew.Flags().StringVar(&expires, "expires-at", "", "the new lease expiry (RFC 3339)")
	_ = renew.MarkFlagRequired("fencing-token")
	_ = renew.MarkFlagRequired("expires-at")
	cmd.AddCommand(renew)
	return cmd
}

// printRenewal renders the daemon's answer to a renewal: the new expiry, or
// the refusal's code and message (escaped by termsafe).
func printRenewal(w io.Writer, attemptID string, reply messages.RenewLeaseReply, refused *client.Error) {
	switch {
	case refused == nil:
		fmt.Fprintf(w, "lease of attempt %s extended to %s\n", termsafe.String(attemptID), reply.ExpiresAt.Format(time.RFC3339))
	case refused.Code == "":
		fmt.Fprintf(w, "daemon answered %d: %s\n", refused.Status, termsafe.String(refused.Message))
	default:
		fmt.Fprintf(w, "refused: %s: %s\n", termsafe.String(string(refused.Code)), termsafe.String(refused.Message))
	}
}

// printRenewalJSON prints the daemon's answer as JSON: the reply, or the
// refusal's {code, message} (a body that was not JSON, escaped by
// termsafe, as it came).
func printRenewalJSON(w io.Writer, reply messages.RenewLeaseReply, refused *client.Error) error {
	var v any = reply
	if refused != nil {
		if refused.Code == "" {
			_, err := fmt.Fprintln(w, termsafe.String(refused.Message))
			return err
		}
		v = messages.APIError{Code: string(refused.Code), Message: refused.Message}
	}
	return json.NewEncoder(w).Encode(v)
}
