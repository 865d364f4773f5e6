package runner_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/errdefs"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
)

// BenchmarkLeaseExpiryToWorkerStopped measures, on the real engine, the
// time from a lease's deadline to the worker container no longer running.
//
// Method: one untimed attempt first builds the sandbox image. Each
// iteration then runs an attempt whose task sleeps far past its lease
// (8 s). Once the task has started, the benchmark polls the engine's
// inspected state of the worker container every 2 ms and takes the first
// instant it is not running (or gone) as the stop time; the metric
// stop-ms/op is the mean of stop time minus the lease deadline. It includes
// the host watchdog's reaction (see BenchmarkLeaseWatchdogReaction, well
// under 1 ms), the worker's own lease enforcement racing it, and the
// engine's stop of the container. ns/op is dominated by waiting for the
// lease and is not the figure of interest.
//
//	go test -run '^$' -bench LeaseExpiryToWorkerStopped -benchtime 5x ./runner/
func BenchmarkLeaseExpiryToWorkerStopped(b *testing.B) {
	engine := enginetest.Client(b)
	ctx := context.Background()
	r, err := runner.New(ctx, runner.Config{
		StateRoot: b.TempDir(), LockRoot: b.TempDir(), WorkerBinary: workerbin.Path(b),
		AllowRootful: true, Capacity: example.SmallHostCapacity(), Slots: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := example.BuildBaseImage(ctx, r.Docker(), "/bin/busybox"); err != nil {
		b.Fatal(err)
	}
	repo := filepath.Join(b.TempDir(), "repo")
	if err := example.CreateRepo(ctx, repo, example.RepoOptions{}); err != nil {
		b.Fatal(err)
	}
	// One untimed attempt builds the sandbox image first: on a loaded host
	// the build alone can outlast a timed attempt's 8 s lease.
	warm, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: r.RunnerID(), RepoPath: repo})
	if err != nil {
		b.Fatal(err)
	}
	if reply, err := r.Submit(warm); err != nil || !reply.Accepted {
		b.Fatalf("submit: %v %+v", err, reply)
	}
	warmLog, _ := r.Logs().Get(warm.AttemptID())
	warmCtx, cancelWarm := context.WithTimeout(ctx, 5*time.Minute)
	out, err := warmLog.Wait(warmCtx)
	cancelWarm()
	if err != nil || out.Status != messages.StatusSucceeded {
		b.Fatalf("warm-up attempt: %v %s %s: %s", err, out.Status, out.Code, out.Message)
	}
	b.ResetTimer()
	var total, worst time.Duration
	for i := 0; i < b.N; i++ {
		d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: r.RunnerID(), RepoPath: repo, Argv: []string{"/bin/sh", "-c", "sleep 300"}, Lease: 8 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		names, _ := dockerops.NamesFor(d.AttemptID())
		if reply, err := r.Submit(d); err != nil || !reply.Accepted {
			b.Fatalf("submit: %v %+v", err, reply)
		}
		log, _ := r.Logs().Get(d.AttemptID())
		waitForEvent(b, log, "task_started")
		var stopped time.Time
		for stopped.IsZero() {
			info, err := engine.ContainerInspect(ctx, names.Container)
			switch {
			case errdefs.IsNotFound(err), err == nil && !info.State.Running:
				stopped = time.Now()
			case err != nil:
				b.Fatal(err)
			default:
				time.Sleep(2 * time.Millisecond)
			}
		}
		late := stopped.Sub(d.Lease.ExpiresAt)
		total += late
		worst = max(worst, late)
		waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if _, err := log.Wait(waitCtx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "stop-ms/op")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-stop-ms")
}
