package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// fakeRunner is the daemon behind the real API handler: it records what
// the API asked and answers what the test set.
type fakeRunner struct {
	logs    *runner.Logs
	metrics *metrics.Metrics

	mu        sync.Mutex
	submitted []*messages.Dispatch
	refuse    *messages.SubmitReply // set: Submit refuses with it
	cancelled []string
	renewals  []messages.RenewRequest
	renew     messages.RenewLeaseReply
	reports   []messages.CleanupReport
	acked     []string
	frames    int
}

func (f *fakeRunner) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return *f.refuse, nil
	}
	f.submitted = append(f.submitted, d)
	f.logs.Open(d.AttemptID())
	return messages.SubmitReply{AttemptID: d.AttemptID(), Accepted: true, Queued: true}, nil
}

func (f *fakeRunner) Cancel(attemptID, _ string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, attemptID)
	_, ok := f.logs.Get(attemptID)
	return ok, nil
}

func (f *fakeRunner) Renew(attemptID, token string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewals = append(f.renewals, messages.RenewRequest{FencingToken: token, ExpiresAt: expiresAt})
	reply := f.renew
	reply.AttemptID = attemptID
	return reply, nil
}

func (f *fakeRunner) Snapshot() (messages.Snapshot, error) {
	return messages.Snapshot{Slots: 2, Attempts: []string{"a1"}, Queued: 1}, nil
}

func (f *fakeRunner) Inspect() []messages.InspectReply {
	return []messages.InspectReply{
		{PID: "supervisor", Kind: "supervisor", Phase: "running", Children: []string{"supervisor/a1"}},
		{PID: "supervisor/a1", Kind: "attempt", Phase: "running", Facts: map[string]string{"container": "forge-a1"}},
	}
}

func (f *fakeRunner) Logs() *runner.Logs { return f.logs }

func (f *fakeRunner) CleanupReports() ([]messages.CleanupReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reports, nil
}

func (f *fakeRunner) AcknowledgeReport(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.HasPrefix(id, "r") {
		return failure.New(failure.Code("cleanup_report_invalid"), "no report %s", id)
	}
	f.acked = append(f.acked, id)
	return nil
}

func (f *fakeRunner) Reap(bool, *reaper.Snapshot) (reaper.Round, error) { return reaper.Round{}, nil }
func (f *fakeRunner) Metrics() *metrics.Metrics                         { return f.metrics }

func (f *fakeRunner) Console() runner.ConsoleFrame {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frames++
	return runner.ConsoleFrame{At: time.Unix(int64(f.frames), 0).UTC(), Actors: []runner.ActorView{{InspectReply: messages.InspectReply{PID: "supervisor", Kind: "supervisor"}}}}
}

// serve serves the real API for f on a temporary unix socket, with opts,
// and returns a client for it.
func serve(t *testing.T, f *fakeRunner, opts httpapi.Options) *client.Client {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "forged.sock")
	l, err := httpapi.Listen(socket, httpapi.ListenOptions{})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- httpapi.Serve(ctx, l, httpapi.HandlerWith(f, slog.New(slog.NewTextHandler(io.Discard, nil)), opts), time.Second)
	}()
	c := client.New(socket)
	t.Cleanup(func() {
		c.Close()
		stop()
		assert.NoError(t, <-served)
	})
	return c
}

// locked runs read or write under the fake's lock: the API's handlers
// touch the fake on their own goroutines.
func (f *fakeRunner) locked(do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do()
}

func newFake() *fakeRunner { return &fakeRunner{logs: runner.NewLogs(0), metrics: metrics.New()} }

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refusal asserts err is the daemon's refusal with status and code.
func refusal(t *testing.T, err error, status int, code failure.Code) {
	t.Helper()
	var refused *client.Error
	require.True(t, errors.As(err, &refused), "%v", err)
	assert.Equal(t, status, refused.Status)
	assert.Equal(t, code, refused.Code)
	assert.Equal(t, code, failure.CodeOf(err), "failure.CodeOf reads the daemon's code")
	assert.NotEmpty(t, refused.Message)
}

func TestSubmitFollowAndListAnAttempt(t *testing.T) {
	f := newFake()
	c := serve(t, f, httpapi.Options{})
	ctx := callCtx(t)
	d := actortest.NewDispatch(time.Now().Add(time.Hour))

	accepted, err := c.Submit(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, messages.SubmitAccepted{AttemptID: d.AttemptID(), Queued: true}, accepted)
	f.locked(func() {
		require.Len(t, f.submitted, 1)
		assert.Equal(t, d.Lease.FencingToken, f.submitted[0].Lease.FencingToken, "the dispatch arrives as sent")
	})

	log, ok := f.logs.Get(d.AttemptID())
	require.True(t, ok)
	log.Append(messages.Event{EventType: "sandbox_created", Content: "one"})
	var seen []string
	followed := make(chan error, 1)
	var outcome messages.AttemptOutcome
	go func() {
		var err error
		outcome, err = c.Events(ctx, d.AttemptID(), func(ev messages.Event) error {
			seen = append(seen, ev.Content)
			if ev.Content == "one" {
				// The stream is open: what comes now arrives on it.
				log.Append(messages.Event{EventType: "task_started", Content: "two"})
				log.Finish(messages.AttemptOutcome{AttemptID: d.AttemptID(), Status: messages.StatusSucceeded})
			}
			return nil
		})
		followed <- err
	}()
	require.NoError(t, <-followed)
	assert.Equal(t, []string{"one", "two"}, seen)
	assert.Equal(t, messages.StatusSucceeded, outcome.Status)

	list, err := c.Attempts(ctx, messages.AttemptStateFinished, 10)
	require.NoError(t, err)
	require.Len(t, list.Attempts, 1)
	assert.Equal(t, d.AttemptID(), list.Attempts[0].AttemptID)
	assert.Equal(t, 2, list.Attempts[0].Events)
	require.NotNil(t, list.Attempts[0].Outcome)
	list, err = c.Attempts(ctx, messages.AttemptStateRunning, 0)
	require.NoError(t, err)
	assert.Empty(t, list.Attempts)
}

func TestEventsEndsWithTheCallbacksError(t *testing.T) {
	f := newFake()
	c := serve(t, f, httpapi.Options{})
	ctx := callCtx(t)
	log, ok := f.logs.Open("a1")
	require.True(t, ok)
	log.Append(messages.Event{EventType: "x"})
	stop := errors.New("enough")
	_, err := c.Events(ctx, "a1", func(messages.Event) error { return stop })
	assert.ErrorIs(t, err, stop)
}

func TestRefusalsCarryTheDaemonsCode(t *testing.T) {
	f := newFake()
	c := serve(t, f, httpapi.Options{})
	ctx := callCtx(t)

	_, err := c.Submit(ctx, &messages.Dispatch{})
	refusal(t, err, 400, failure.DispatchInvalid)

	f.locked(func() { f.refuse = &messages.SubmitReply{Code: string(failure.AttemptDuplicate), Message: "seen"} })
	_, err = c.Submit(ctx, actortest.NewDispatch(time.Now().Add(time.Hour)))
	refusal(t, err, 409, failure.AttemptDuplicate)

	refusal(t, c.Cancel(ctx, "nobody"), 404, failure.AttemptNotFound)
	f.locked(func() { assert.Equal(t, []string{"nobody"}, f.cancelled) })
	_, err = c.Events(ctx, "nobody", func(messages.Event) error { return nil })
	refusal(t, err, 404, failure.AttemptNotFound)
	_, err = c.Attempts(ctx, "sideways", 0)
	refusal(t, err, 400, failure.QueryInvalid)
	_, err = c.Attempts(ctx, "", messages.MaxAttemptListLimit+1)
	refusal(t, err, 400, failure.QueryInvalid)
	_, err = c.RenewLease(ctx, "a1", "not-a-uuid", time.Now())
	refusal(t, err, 400, failure.LeaseRenewalInvalid)
	refusal(t, c.AcknowledgeReport(ctx, "x1"), 400, failure.Code("cleanup_report_invalid"))
}

func TestCancelAKnownAttempt(t *testing.T) {
	f := newFake()
	c := serve(t, f, httpapi.Options{})
	_, ok := f.logs.Open("a1")
	require.True(t, ok)
	require.NoError(t, c.Cancel(callCtx(t), "a1"))
	f.locked(func() { assert.Equal(t, []string{"a1"}, f.cancelled) })
}

func TestRenewLease(t *testing.T) {
	f := newFake()
	c := serve(t, f, httpapi.Options{})
	ctx := callCtx(t)
	token := "0f0e0d0c-0b0a-4908-8706-050403020100"
	expires := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

	f.locked(func() { f.renew = messages.RenewLeaseReply{Accepted: true, ExpiresAt: expires} })
	reply, err := c.RenewLease(ctx, "a1", token, expires)
	require.NoError(t, err)
	assert.Equal(t, messages.RenewLeaseReply{AttemptID: "a1", Accepted: true, ExpiresAt: expires}, reply)
	f.locked(func() {
		assert.Equal(t, []messages.RenewRequest{{FencingToken: token, ExpiresAt: expires}}, f.renewals)
		f.renew = messages.RenewLeaseReply{Code: string(failure.LeaseUpdateStale), Message: "not later"}
	})
	_, err = c.RenewLease(ctx, "a1", token, expires)
	refusal(t, err, 409, failure.LeaseUpdateStale)
}

func TestSnapshotInspectReportsMetricsAndConsole(t *testing.T) {
	f := newFake()
	f.reports = []messages.CleanupReport{{ReportID: "r1"}}
	c := serve(t, f, httpapi.Options{ManageToken: "secret"})
	ctx := callCtx(t)

	snap, err := c.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, snap.Slots)
	assert.Equal(t, []string{"a1"}, snap.Attempts)

	tree, err := c.Inspect(ctx)
	require.NoError(t, err)
	require.Len(t, tree, 2)
	assert.Equal(t, "supervisor", tree[0].Kind)
	assert.Equal(t, "forge-a1", tree[1].Facts["container"])

	reports, err := c.CleanupReports(ctx)
	require.NoError(t, err)
	assert.Equal(t, f.reports, reports)
	require.NoError(t, c.AcknowledgeReport(ctx, "r1"))
	f.locked(func() { assert.Equal(t, []string{"r1"}, f.acked) })

	text, err := c.Metrics(ctx)
	require.NoError(t, err)
	assert.Contains(t, text, "# TYPE")

	cfg, err := c.ConsoleConfig(ctx)
	require.NoError(t, err)
	assert.True(t, cfg.Manage)
}

func TestFramesFollowsTheConsoleUntilTheCallbackStops(t *testing.T) {
	c := serve(t, newFake(), httpapi.Options{})
	var frames []messages.ConsoleFrame
	enough := errors.New("enough")
	err := c.Frames(callCtx(t), httpapi.MinStreamInterval, func(frame messages.ConsoleFrame, raw json.RawMessage) error {
		assert.Contains(t, string(raw), `"pid":"supervisor"`)
		frames = append(frames, frame)
		if len(frames) == 2 {
			return enough
		}
		return nil
	})
	assert.ErrorIs(t, err, enough)
	require.Len(t, frames, 2)
	assert.True(t, frames[1].At.After(frames[0].At))
	assert.Equal(t, "supervisor", frames[0].Actors[0].PID)

	err = c.Frames(callCtx(t), time.Hour, func(messages.ConsoleFrame, json.RawMessage) error { return nil })
	refusal(t, err, 400, failure.QueryInvalid)

	ctx, cancel := context.WithCancel(context.Background())
	err = c.Frames(ctx, httpapi.MinStreamInterval, func(messages.ConsoleFrame, json.RawMessage) error { cancel(); return nil })
	assert.NoError(t, err, "a stream ended by its context ends cleanly")
}

func TestAnUnreachableDaemonIsNoRefusal(t *testing.T) {
	c := client.New(filepath.Join(t.TempDir(), "absent.sock"))
	_, err := c.Snapshot(callCtx(t))
	require.Error(t, err)
	var refused *client.Error
	assert.False(t, errors.As(err, &refused))
	assert.Empty(t, failure.CodeOf(err))
}

// TestFollowResumesAcrossARestartOfTheDaemon: a client following an
// attempt sees the daemon die (its connections cut, its socket gone), and
// a new daemon start on the same state root; Follow reconnects with the
// last sequence number it saw and gets every other event once, in order,
// the one the old process wrote after the cut included, then the outcome.
func TestFollowResumesAcrossARestartOfTheDaemon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), runner.EventsDir)
	socket := filepath.Join(t.TempDir(), "forged.sock")
	up := func() (*runner.Logs, func()) {
		logs, err := runner.OpenLogs(dir, 0)
		require.NoError(t, err)
		l, err := httpapi.Listen(socket, httpapi.ListenOptions{})
		require.NoError(t, err)
		srv := &http.Server{Handler: httpapi.HandlerWith(&fakeRunner{logs: logs, metrics: metrics.New()}, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Options{})}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(l) }()
		return logs, func() { _ = srv.Close(); <-served } // connections cut at once, like a kill
	}
	first, kill := up()
	log, ok := first.Open("a1")
	require.True(t, ok)
	log.Append(messages.Event{EventType: "one"})
	log.Append(messages.Event{EventType: "two"})

	c := client.New(socket)
	defer c.Close()
	type seen struct {
		seq int
		typ string
	}
	got := make(chan seen, 16)
	type result struct {
		out messages.AttemptOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.Follow(callCtx(t), "a1", 0, func(seq int, ev messages.Event) error {
			got <- seen{seq, ev.EventType}
			return nil
		})
		done <- result{out, err}
	}()
	assert.Equal(t, seen{1, "one"}, <-got)
	assert.Equal(t, seen{2, "two"}, <-got)
	kill()
	log.Append(messages.Event{EventType: "three"}) // written by the old process after the cut

	second, stop := up()
	defer stop()
	resumed, ok := second.Get("a1")
	require.True(t, ok, "the new daemon serves the attempt's log")
	resumed.Append(messages.Event{EventType: "four"})
	resumed.Finish(messages.AttemptOutcome{AttemptID: "a1", Status: messages.StatusSucceeded})
	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, messages.StatusSucceeded, res.out.Status)
	close(got)
	var rest []seen
	for s := range got {
		rest = append(rest, s)
	}
	assert.Equal(t, []seen{{3, "three"}, {4, "four"}}, rest, "each event once, none skipped")

	// A cursor: the events after it; one past the last event is refused.
	var after []int
	_, err := c.EventsAfter(callCtx(t), "a1", 2, func(seq int, _ messages.Event) error { after = append(after, seq); return nil })
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4}, after)
	_, err = c.EventsAfter(callCtx(t), "a1", 5, func(int, messages.Event) error { return nil })
	refusal(t, err, 400, failure.QueryInvalid)
	_, err = c.Follow(callCtx(t), "nobody", 0, func(int, messages.Event) error { return nil })
	refusal(t, err, 404, failure.AttemptNotFound)
}
