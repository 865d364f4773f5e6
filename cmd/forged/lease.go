package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/kit/termsafe"
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
			body, err := json.Marshal(httpapi.RenewRequest{FencingToken: token, ExpiresAt: expiresAt})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://forged/v1/attempts/"+args[0]+"/lease", bytes.NewReader(body))
			if err != nil {
				return err
			}
			res, err := unixClient(socket).Do(req)
			if err != nil {
				return fmt.Errorf("daemon at %s: %w", socket, err)
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(res.Body, 64*1024))
			if err != nil {
				return err
			}
			if asJSON {
				fmt.Fprintln(cmd.OutOrStdout(), string(bytes.TrimSpace(raw)))
			} else {
				printRenewal(cmd.OutOrStdout(), args[0], res.StatusCode, raw)
			}
			if res.StatusCode != http.StatusOK {
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

// unixClient is an HTTP client for the daemon's unix socket.
func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
}

// printRenewal renders the daemon's answer to a renewal: the new expiry, or
// the refusal's code and message (escaped by termsafe).
func printRenewal(w io.Writer, attemptID string, status int, raw []byte) {
	var body struct {
		ExpiresAt time.Time `json:"expiresAt"`
		Code      string    `json:"code"`
		Message   string    `json:"message"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		fmt.Fprintf(w, "daemon answered %d: %s\n", status, termsafe.String(string(bytes.TrimSpace(raw))))
		return
	}
	if status == http.StatusOK && body.Code == "" {
		fmt.Fprintf(w, "lease of attempt %s extended to %s\n", termsafe.String(attemptID), body.ExpiresAt.Format(time.RFC3339))
		return
	}
	fmt.Fprintf(w, "refused: %s: %s\n", termsafe.String(body.Code), termsafe.String(body.Message))
}
