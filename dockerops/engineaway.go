package dockerops

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/forgedev/forged/failure"
)

// EngineAwayError ends a run (RunAttached, Reattach) whose engine stopped
// answering while the worker ran: the output stream ended or broke, and
// the engine could not then say how the container ended (dockerd stopped
// or restarting). The container is left alone, not stopped: an engine
// with live-restore keeps it running across its restart, and the caller
// may Reattach once the engine answers again. It is returned wrapped in a
// *failure.Error with failure.SandboxRuntimeFailed.
type EngineAwayError struct {
	ContainerID string
	Err         error
}

func (e *EngineAwayError) Error() string {
	return fmt.Sprintf("worker %s: no answer from the Docker engine (is it down or restarting?): %v", shortID(e.ContainerID), e.Err)
}

func (e *EngineAwayError) Unwrap() error { return e.Err }

// engineAwayRun is the error of a run whose engine went away.
func engineAwayRun(containerID string, err error) error {
	return failure.Wrap(failure.SandboxRuntimeFailed, &EngineAwayError{ContainerID: containerID, Err: err}, "the worker's run lost the engine")
}

// LiveRestore reports whether the engine keeps containers running while
// dockerd is down (its live-restore setting). The answer is the engine's
// of at most liveRestoreTTL ago: every worker's run asks, and an engine's
// info is one of its dearer calls (a burst asked it once per attempt).
// The setting changes only when the engine reloads or restarts; a run
// that starts within the TTL of such a change may act on the old answer,
// as a run that asked just before the change would. Errors are not kept.
func (c *Client) LiveRestore(ctx context.Context) (bool, error) {
	if c.raw == nil {
		return false, nil
	}
	if on, ok := c.live.get(time.Now()); ok {
		return on, nil
	}
	info, err := call(ctx, c, c.opts.Timeouts.Ping, readCall, c.raw.Info)
	if err != nil {
		return false, opError(ctx, "", err, "docker info")
	}
	c.live.put(info.LiveRestoreEnabled, time.Now())
	return info.LiveRestoreEnabled, nil
}

// liveRestoreTTL is how long an engine's live-restore answer is reused.
const liveRestoreTTL = 10 * time.Second

// liveRestoreCache keeps the engine's last live-restore answer and when it
// was given. A nil cache keeps nothing.
type liveRestoreCache struct {
	mu    sync.Mutex
	on    bool
	at    time.Time
	known bool
}

func (l *liveRestoreCache) get(now time.Time) (bool, bool) {
	if l == nil {
		return false, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known || now.Sub(l.at) >= liveRestoreTTL || now.Before(l.at) {
		return false, false
	}
	return l.on, true
}

func (l *liveRestoreCache) put(on bool, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on, l.at, l.known = on, now, true
}
