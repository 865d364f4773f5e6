package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/forgedev/forged/messages"
)

// Submit admits a dispatch (POST /v1/attempts). A refusal (dispatch
// invalid, a duplicate attempt id, admission full, …) is an *Error with
// its code.
func (c *Client) Submit(ctx context.Context, d *messages.Dispatch) (messages.SubmitAccepted, error) {
	var out messages.SubmitAccepted
	err := c.call(ctx, http.MethodPost, "/v1/attempts", d, http.StatusAccepted, &out)
	return out, err
}

// Attempts lists the daemon's attempts (GET /v1/attempts): state is
// messages.AttemptStateRunning, AttemptStateFinished or AttemptStateAll
// ("" is all), newest first, at most limit of them (0: the daemon's
// default, messages.DefaultAttemptListLimit).
func (c *Client) Attempts(ctx context.Context, state string, limit int) (messages.AttemptList, error) {
	query := url.Values{}
	if state != "" {
		query.Set("state", state)
	}
	if limit != 0 {
		query.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/attempts"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var out messages.AttemptList
	err := c.call(ctx, http.MethodGet, path, nil, http.StatusOK, &out)
	return out, err
}

// Events follows an attempt's events (GET /v1/attempts/{id}/events): it
// calls onEvent for each, from the first, and returns the outcome once the
// attempt finished. An error from onEvent ends the stream and is
// returned. A stream that ends without the outcome (the daemon went away,
// the connection broke) is ErrStreamEnded; Follow reconnects instead.
func (c *Client) Events(ctx context.Context, attemptID string, onEvent func(messages.Event) error) (messages.AttemptOutcome, error) {
	return c.EventsAfter(ctx, attemptID, 0, func(_ int, ev messages.Event) error { return onEvent(ev) })
}

// EventsAfter is Events from a cursor: it follows the events after
// sequence number after (the last one the caller saw; 0 for all) and
// passes each with its own sequence number. The numbers are the daemon's,
// durable across its restarts, so a caller that saw up to n before a
// restart asks for the events after n and gets each of the rest once.
func (c *Client) EventsAfter(ctx context.Context, attemptID string, after int, onEvent func(seq int, ev messages.Event) error) (messages.AttemptOutcome, error) {
	path := "/v1/attempts/" + escape(attemptID) + "/events"
	if after > 0 {
		path += "?after=" + strconv.Itoa(after)
	}
	res, err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK)
	if err != nil {
		return messages.AttemptOutcome{}, err
	}
	defer res.Body.Close()
	scanner := bufio.NewScanner(res.Body)
	scanner.Buffer(make([]byte, 64<<10), MaxFrame)
	for scanner.Scan() {
		var line messages.StreamLine
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			return messages.AttemptOutcome{}, fmt.Errorf("client: events of %s: %w", attemptID, err)
		}
		switch {
		case line.Type == messages.StreamLineFinished && line.Outcome != nil:
			return *line.Outcome, nil
		case line.Type == messages.StreamLineEvent && line.Event != nil:
			if err := onEvent(line.Seq, *line.Event); err != nil {
				return messages.AttemptOutcome{}, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return messages.AttemptOutcome{}, err
	}
	if err := scanner.Err(); err != nil {
		return messages.AttemptOutcome{}, fmt.Errorf("%w (events of %s): %w", ErrStreamEnded, attemptID, err)
	}
	return messages.AttemptOutcome{}, ErrStreamEnded
}

// Reconnection pacing of Follow: the first wait, doubled up to the last.
const (
	FollowRetryFirst = 100 * time.Millisecond
	FollowRetryMax   = 2 * time.Second
)

// callbackError carries an error of Follow's onEvent through EventsAfter.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// Follow follows an attempt's events to its outcome across restarts of
// the daemon (a crash, an upgrade): when the stream ends without the
// outcome or the socket does not answer, it reconnects (FollowRetryFirst,
// doubling to FollowRetryMax, until ctx ends) and asks for the events
// after the last sequence number it passed on. So onEvent sees each event
// once, in order, from the one after after. A refusal of the daemon (an
// *Error: the attempt is not known, the cursor is refused) and an error of
// onEvent end it, returned as they are.
func (c *Client) Follow(ctx context.Context, attemptID string, after int, onEvent func(seq int, ev messages.Event) error) (messages.AttemptOutcome, error) {
	last, wait := after, FollowRetryFirst
	for {
		out, err := c.EventsAfter(ctx, attemptID, last, func(seq int, ev messages.Event) error {
			if seq <= last {
				return nil // never twice
			}
			if err := onEvent(seq, ev); err != nil {
				return callbackError{err}
			}
			last, wait = seq, FollowRetryFirst
			return nil
		})
		var refused *Error
		var callback callbackError
		switch {
		case err == nil:
			return out, nil
		case errors.As(err, &callback):
			return messages.AttemptOutcome{}, callback.err
		case errors.As(err, &refused), ctx.Err() != nil:
			return messages.AttemptOutcome{}, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return messages.AttemptOutcome{}, ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, FollowRetryMax)
	}
}

// Cancel asks for an attempt to be cancelled (DELETE /v1/attempts/{id});
// an attempt the daemon does not know is an *Error with code
// attempt_not_found.
func (c *Client) Cancel(ctx context.Context, attemptID string) error {
	return c.call(ctx, http.MethodDelete, "/v1/attempts/"+escape(attemptID), nil, http.StatusAccepted, nil)
}

// RenewLease extends a running attempt's lease (POST
// /v1/attempts/{id}/lease) to expiresAt, strictly later than the one it
// holds, under its fencing token. A refusal (a stale expiry, a wrong
// token, no such attempt) is an *Error with its code.
func (c *Client) RenewLease(ctx context.Context, attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	var out messages.RenewLeaseReply
	err := c.call(ctx, http.MethodPost, "/v1/attempts/"+escape(attemptID)+"/lease",
		messages.RenewRequest{FencingToken: fencingToken, ExpiresAt: expiresAt}, http.StatusOK, &out)
	return out, err
}
