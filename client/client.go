// Package client is a typed Go client for the forged daemon's HTTP API,
// which the daemon serves on its unix socket (`forged daemon --socket`,
// by default STATE_ROOT/forged.sock; only the peers whose uid the daemon
// allows may connect). Requests and answers are package messages' types;
// a refusal or failure the daemon answers is an *Error carrying the
// daemon's failure code, which failure.CodeOf reads:
//
//	c := client.New("/var/lib/forged/forged.sock")
//	accepted, err := c.Submit(ctx, dispatch)
//	if failure.Is(err, failure.AttemptDuplicate) { … }
//	outcome, err := c.Events(ctx, accepted.AttemptID, func(ev messages.Event) error { … })
//
// Every method honours ctx: give it a deadline, except for the streams
// (Events, Frames), which end with the attempt, or when ctx does.
//
// The routes are listed in internal/daemon/httpapi. POST /v1/reap has no
// method here: its answer is the reaper's own account, which is not part
// of package messages (forged reap runs the reaper itself).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Size bounds of the answers read (a body beyond them is an error).
const (
	maxAnswer  = 64 << 20 // listings, reports, the actor tree
	maxRefusal = 64 << 10 // an error body
	// MaxFrame bounds one console frame or event line of a stream.
	MaxFrame = 16 << 20
)

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	http *http.Client
}

// New returns a client for the daemon listening on the unix socket at
// socket. Nothing is dialled until the first request.
func New(socket string) *Client {
	return &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is a refusal or failure the daemon answered: its HTTP status and
// the failure code and message of its body. failure.CodeOf(err) and
// failure.Is(err, code) read Code (an *Error unwraps to a *failure.Error);
// a body that is not the API's error body leaves Code empty and Message
// holding the body.
type Error struct {
	Status  int
	Code    failure.Code
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("daemon answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("daemon answered %d %s: %s: %s", e.Status, http.StatusText(e.Status), e.Code, e.Message)
}

// Unwrap returns the daemon's failure as a *failure.Error, or nil when its
// body carried no code.
func (e *Error) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return &failure.Error{Code: e.Code, Message: e.Message}
}

// do sends one request and returns the answer when its status is want;
// any other status is read as an *Error and the body closed.
func (c *Client) do(ctx context.Context, method, path string, body any, want int) (*http.Response, error) {
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+messages.APISocketHost+path, reader)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		// The daemon's guard: a state-changing request is JSON and says
		// it comes from a client, which a foreign web page cannot.
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(messages.APIClientHeader, messages.APIClientValue)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if res.StatusCode != want {
		defer res.Body.Close()
		return nil, readError(res)
	}
	return res, nil
}

// readError reads a refusal's body into an *Error.
func readError(res *http.Response) error {
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxRefusal))
	if err != nil {
		return fmt.Errorf("client: reading the daemon's %s: %w", res.Status, err)
	}
	var body messages.APIError
	if json.Unmarshal(raw, &body) == nil && body.Code != "" {
		return &Error{Status: res.StatusCode, Code: failure.Code(body.Code), Message: body.Message}
	}
	return &Error{Status: res.StatusCode, Message: strings.TrimSpace(string(raw))}
}

// call sends one request and decodes the answer, of status want, into out
// (nil: the body is discarded).
func (c *Client) call(ctx context.Context, method, path string, body any, want int, out any) error {
	res, err := c.do(ctx, method, path, body, want)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxRefusal))
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if len(raw) > maxAnswer {
		return fmt.Errorf("client: %s %s: the answer is larger than %d bytes", method, path, maxAnswer)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	return nil
}

// escape makes an attempt id one path segment.
func escape(id string) string { return url.PathEscape(id) }

// ErrStreamEnded is an events stream that ended before the attempt's
// outcome (the daemon went away, or the connection broke).
var ErrStreamEnded = errors.New("client: the stream ended before the attempt finished")
