package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// routeTimeout bounds a forwarded submission or cancellation made through
// the daemon's API.
const routeTimeout = 30 * time.Second

// Routed is the daemon's runner as its API serves it in a fleet: Submit and
// Cancel go to the member the dispatch names (or that runs the attempt),
// the rest is the local runner's. A forwarded attempt's events and outcome
// arrive in the local runner's logs (the member proxies them), so a client
// follows it through this daemon's socket.
type Routed struct {
	*runner.Runner
	Member *Member
}

// Submit admits d here or on the member its execution.runnerId names.
func (r Routed) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	if d.Execution.RunnerID == r.Runner.RunnerID() {
		return r.Runner.Submit(d)
	}
	// Forwarded or placed: the member decodes the document again.
	raw, err := json.Marshal(d)
	if err != nil {
		return messages.SubmitReply{}, fmt.Errorf("fleet: encode the dispatch: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), routeTimeout)
	defer cancel()
	reply, _, err := r.Member.Submit(ctx, raw)
	return reply, err
}

// Renew renews the attempt's lease where it runs.
func (r Routed) Renew(attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), routeTimeout)
	defer cancel()
	return r.Member.RenewAttempt(ctx, attemptID, fencingToken, expiresAt)
}

// Cancel cancels the attempt where it runs.
func (r Routed) Cancel(attemptID, reason string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), routeTimeout)
	defer cancel()
	return r.Member.CancelAttempt(ctx, attemptID, reason)
}
