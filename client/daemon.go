package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/forgedev/forged/messages"
)

// Snapshot returns the supervisor's counts (GET /v1/snapshot).
func (c *Client) Snapshot(ctx context.Context) (messages.Snapshot, error) {
	var out messages.Snapshot
	err := c.call(ctx, http.MethodGet, "/v1/snapshot", nil, http.StatusOK, &out)
	return out, err
}

// Inspect returns the live actor tree (GET /v1/inspect): every actor's
// InspectReply, parents before children, the root supervisor first.
func (c *Client) Inspect(ctx context.Context) ([]messages.InspectReply, error) {
	var out []messages.InspectReply
	err := c.call(ctx, http.MethodGet, "/v1/inspect", nil, http.StatusOK, &out)
	return out, err
}

// Frames follows the live console (GET /v1/inspect/stream): the daemon
// sends a frame every interval (0: its default, one second) and Frames
// calls onFrame with each, decoded and as the daemon sent it, until ctx
// ends (Frames then returns nil), onFrame returns an error (returned), or
// the daemon goes away.
func (c *Client) Frames(ctx context.Context, interval time.Duration, onFrame func(frame messages.ConsoleFrame, raw json.RawMessage) error) error {
	path := "/v1/inspect/stream"
	if interval != 0 {
		path += "?" + url.Values{"interval": {interval.String()}}.Encode()
	}
	res, err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer res.Body.Close()
	scanner := bufio.NewScanner(res.Body)
	scanner.Buffer(make([]byte, 64<<10), MaxFrame)
	for scanner.Scan() {
		data, ok := strings.CutPrefix(scanner.Text(), "data: ")
		if !ok {
			continue // the event's name, or the blank line ending it
		}
		var frame messages.ConsoleFrame
		if err := json.Unmarshal([]byte(data), &frame); err != nil {
			return fmt.Errorf("client: console frame: %w", err)
		}
		if err := onFrame(frame, json.RawMessage(data)); err != nil {
			return err
		}
	}
	if err := scanner.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("client: console stream: %w", err)
	}
	return nil
}

// Fleet returns the fleet's directory as the daemon, one of its members,
// sees it (GET /v1/fleet); a daemon running alone answers Member false.
func (c *Client) Fleet(ctx context.Context) (messages.FleetDirectory, error) {
	var out messages.FleetDirectory
	err := c.call(ctx, http.MethodGet, "/v1/fleet", nil, http.StatusOK, &out)
	return out, err
}

// InspectMember returns the live actor tree of the fleet member whose
// runner id is runnerID, read through the daemon, a member of the fleet
// (GET /v1/fleet/members/{runnerId}/inspect): fleet_member_unknown when
// no member has it or the daemon runs alone.
func (c *Client) InspectMember(ctx context.Context, runnerID string) ([]messages.InspectReply, error) {
	var out []messages.InspectReply
	err := c.call(ctx, http.MethodGet, "/v1/fleet/members/"+escape(runnerID)+"/inspect", nil, http.StatusOK, &out)
	return out, err
}

// CleanupReports lists the cleanup reports (teardown and reaper) not yet
// acknowledged (GET /v1/cleanup-reports).
func (c *Client) CleanupReports(ctx context.Context) ([]messages.CleanupReport, error) {
	var out []messages.CleanupReport
	err := c.call(ctx, http.MethodGet, "/v1/cleanup-reports", nil, http.StatusOK, &out)
	return out, err
}

// AcknowledgeReport removes an acknowledged cleanup report (DELETE
// /v1/cleanup-reports/{id}).
func (c *Client) AcknowledgeReport(ctx context.Context, reportID string) error {
	return c.call(ctx, http.MethodDelete, "/v1/cleanup-reports/"+escape(reportID), nil, http.StatusNoContent, nil)
}

// Metrics returns the daemon's Prometheus metrics, in the text exposition
// format (GET /metrics).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	res, err := c.do(ctx, http.MethodGet, "/metrics", nil, http.StatusOK)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return "", fmt.Errorf("client: metrics: %w", err)
	}
	return string(raw), nil
}

// ConsoleConfig returns what the console may do (GET /v1/console/config).
func (c *Client) ConsoleConfig(ctx context.Context) (messages.ConsoleConfig, error) {
	var out messages.ConsoleConfig
	err := c.call(ctx, http.MethodGet, "/v1/console/config", nil, http.StatusOK, &out)
	return out, err
}
