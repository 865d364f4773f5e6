package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/collector"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// requestTimeout bounds a request to the root supervisor.
const requestTimeout = 10 * time.Second

// Runner is an embedded forged: an actor system with its root supervisor.
type Runner struct {
	system    *actor.ActorSystem
	root      *actor.PID
	docker    *dockerops.Client
	preflight *preflight.Cache
	logs      *Logs
	metrics   *metrics.Metrics
	store     ledger.Store
	runnerID  string
	images    imagegc.EngineAPI
	imageRefs *imagegc.Refs
	logger    *slog.Logger
	// closers release what New opened, newest first; tree is the running
	// actor tree, nil until start spawned it. See release.
	closers      closers
	tree         *tree
	closeTimeout time.Duration
	releaseOnce  sync.Once
	releaseErr   error
	// Restart is the reaper round run at start-up: the attempts a previous
	// process left behind, torn down and reported sandbox_runner_restarted.
	Restart reaper.Round
}

// Metrics returns the runner's instrumentation.
func (r *Runner) Metrics() *metrics.Metrics { return r.metrics }

// Logs returns the runner's per-attempt event logs.
func (r *Runner) Logs() *Logs { return r.logs }

// Submit admits a dispatch. Its events and outcome are recorded in Logs.
func (r *Runner) Submit(d *messages.Dispatch) (messages.SubmitReply, error) {
	log, ok := r.logs.Open(d.AttemptID())
	if !ok {
		reply := messages.SubmitReply{AttemptID: d.AttemptID(), Code: string(failure.AttemptDuplicate),
			Message: fmt.Sprintf("attempt %s is running or finished within the last %s; an attempt id is never reused", d.AttemptID(), RetainFor)}
		r.metrics.Submitted(reply)
		return reply, nil
	}
	subscriber := r.system.Root.Spawn(r.metrics.Instrument(subscriberProps(log, r.metrics), "subscriber"))
	res, err := r.system.Root.RequestFuture(r.root, messages.SubmitAttempt{Dispatch: d, Subscriber: subscriber}, requestTimeout).Result()
	if err != nil {
		r.system.Root.Stop(subscriber)
		r.logs.discard(d.AttemptID(), log)
		return messages.SubmitReply{}, fmt.Errorf("submit: %w", err)
	}
	reply := res.(messages.SubmitReply)
	r.metrics.Submitted(reply)
	if !reply.Accepted {
		r.system.Root.Stop(subscriber)
		r.logs.discard(d.AttemptID(), log)
	}
	return reply, nil
}

// Cancel asks for an attempt to be cancelled.
func (r *Runner) Cancel(attemptID, reason string) (bool, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.CancelAttempt{AttemptID: attemptID, Reason: reason}, requestTimeout).Result()
	if err != nil {
		return false, fmt.Errorf("cancel: %w", err)
	}
	return res.(messages.CancelReply).Found, nil
}

// Renew extends a running attempt's lease (same fencing token, strictly
// later expiry).
func (r *Runner) Renew(attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.RenewLease{AttemptID: attemptID, FencingToken: fencingToken, ExpiresAt: expiresAt}, requestTimeout).Result()
	if errors.Is(err, actor.ErrDeadLetter) {
		// The attempt stopped between the supervisor's lookup and delivery.
		return messages.RenewLeaseReply{AttemptID: attemptID, Code: string(failure.AttemptNotFound), Message: "the attempt has finished"}, nil
	}
	if err != nil {
		return messages.RenewLeaseReply{}, fmt.Errorf("renew: %w", err)
	}
	return res.(messages.RenewLeaseReply), nil
}

// RunnerID is this runner's id; dispatches must carry it.
func (r *Runner) RunnerID() string { return r.runnerID }

// Reap runs one reaper round now (dryRun: only list what it would remove).
func (r *Runner) Reap(dryRun bool) (reaper.Round, error) {
	res, err := r.system.Root.RequestFuture(r.root, supervisor.ReapNow{DryRun: dryRun}, 6*time.Minute).Result()
	if err != nil {
		return reaper.Round{}, fmt.Errorf("reap: %w", err)
	}
	result := res.(supervisor.ReapResult)
	return result.Round, result.Err
}

// ImageGCConfig configures the daemon's image collector.
type ImageGCConfig struct {
	Policy   imagegc.Policy
	Interval time.Duration // default 1 h; the disk is checked every minute
}

// CollectImagesNow asks the daemon's image collector (a child of the
// supervisor) for a collection and waits for its report. Without a
// collector (Config.ImageGC nil) it fails.
func (r *Runner) CollectImagesNow(dryRun bool) (imagegc.Report, error) {
	res, err := r.system.Root.RequestFuture(r.root, collector.CollectNow{DryRun: dryRun}, 31*time.Minute).Result()
	if err != nil {
		return imagegc.Report{}, fmt.Errorf("image collection: %w", err)
	}
	reply := res.(collector.CollectReply)
	return reply.Report, reply.Err
}

// CollectImages runs one image collection beside the running attempts:
// the image keys they hold are kept, and an attempt acquiring a key waits
// while its images are being removed. req.Refs is set here; a zero req.Now
// is now.
func (r *Runner) CollectImages(ctx context.Context, req imagegc.Request) (imagegc.Report, error) {
	req.Refs = r.imageRefs
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	return imagegc.Collect(ctx, r.images, req)
}

// CleanupReports lists the cleanup reports not yet acknowledged.
func (r *Runner) CleanupReports() ([]messages.CleanupReport, error) { return r.store.PendingReports() }

// AcknowledgeReport removes an acknowledged cleanup report.
func (r *Runner) AcknowledgeReport(reportID string) error { return r.store.AcknowledgeReport(reportID) }

// Snapshot returns the supervisor's counts.
func (r *Runner) Snapshot() (messages.Snapshot, error) {
	res, err := r.system.Root.RequestFuture(r.root, messages.SnapshotRequest{}, requestTimeout).Result()
	if err != nil {
		return messages.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return res.(messages.Snapshot), nil
}

// Inspect walks the actor tree from the root supervisor and returns every
// actor's InspectReply, parents before children. Actors that stop during
// the walk are skipped.
func (r *Runner) Inspect() []messages.InspectReply {
	var out []messages.InspectReply
	queue := []*actor.PID{r.root}
	for len(queue) > 0 && len(out) < 1024 {
		pid := queue[0]
		queue = queue[1:]
		res, err := r.system.Root.RequestFuture(pid, messages.Inspect{}, 2*time.Second).Result()
		if err != nil {
			continue
		}
		reply, ok := res.(messages.InspectReply)
		if !ok {
			continue
		}
		out = append(out, reply)
		for _, child := range reply.Children {
			queue = append(queue, actor.NewPID(r.system.Address(), child))
		}
	}
	return out
}

// Preflight returns the latest preflight report, checking when stale.
func (r *Runner) Preflight(ctx context.Context) preflight.Report {
	report, _ := r.preflight.Current(ctx)
	return report
}

// Docker exposes the Docker client (for the example's base image).
func (r *Runner) Docker() *dockerops.Client { return r.docker }

// Drain cancels every admitted attempt and waits until all have torn down,
// or ctx ends. Attempts that are queued are cancelled without running.
func (r *Runner) Drain(ctx context.Context, reason string) error {
	cancelled := map[string]bool{}
	for {
		snap, err := r.Snapshot()
		if err != nil {
			return err
		}
		if len(snap.Attempts) == 0 && snap.Queued == 0 {
			return nil
		}
		for _, id := range snap.Attempts {
			if !cancelled[id] {
				cancelled[id] = true
				if _, err := r.Cancel(id, reason); err != nil {
					return err
				}
			}
		}
		for _, id := range r.logs.unfinished() {
			if !cancelled[id] {
				cancelled[id] = true
				if _, err := r.Cancel(id, reason); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %w (%d attempts still running)", ctx.Err(), len(snap.Attempts))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServiceCheck reports the service catalogue's state for preflight.
func ServiceCheck(c *services.Catalogue, docker services.ImageInspector) func(context.Context) []preflight.ServiceImage {
	if c == nil {
		return nil
	}
	return func(ctx context.Context) []preflight.ServiceImage {
		var out []preflight.ServiceImage
		for _, st := range c.Check(ctx, docker) {
			out = append(out, preflight.ServiceImage{Service: st.Service, Ref: st.Ref, ImageID: st.ImageID, State: st.State, Detail: st.Detail})
		}
		return out
	}
}

// confinementOf turns the latest preflight report into the attempts'
// confinement facts; without a report nothing is known.
func confinementOf(cache *preflight.Cache) actors.Confinement {
	r, _, ok := cache.Last()
	if !ok {
		return actors.Confinement{NetworkIsolation: failure.New(failure.SandboxNetworkIsolation, "no preflight report yet")}
	}
	return actors.Confinement{
		Security:         dockerops.EngineSecurity{Known: r.Engine.Reachable, Seccomp: r.Features.Seccomp, LSM: slices.Clone(r.Features.LSM)},
		NetworkIsolation: r.Network.NetworkErr(),
	}
}
