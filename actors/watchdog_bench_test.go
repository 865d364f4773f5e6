package actors

import (
	"github.com/forgedev/forged/internal/kit/clock"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// BenchmarkLeaseWatchdogReaction measures how late the lease watchdog tells
// its attempt that the lease expired: each iteration arms a watchdog (on
// the system clk) for a deadline 5 ms ahead and records the time from the
// deadline to the LeaseExpired message arriving at the parent. The reported
// metric late-µs/op is the mean lateness; the seed polled every 500 ms, so
// its lateness was up to 500 ms.
//
//	go test -run '^$' -bench LeaseWatchdogReaction -benchtime 200x ./actors/
func BenchmarkLeaseWatchdogReaction(b *testing.B) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var total, worst time.Duration
	for i := 0; i < b.N; i++ {
		deadline := time.Now().Add(5 * time.Millisecond)
		fired := make(chan time.Time, 1)
		parent := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case *actor.Started:
				ctx.Spawn(newLeaseWatchdogProps(deadline, clock.System{}))
			case watchdogStarted:
				ctx.Respond(leaseRenewed{expiresAt: deadline})
			case LeaseExpired:
				fired <- time.Now()
			}
		}))
		late := (<-fired).Sub(deadline)
		total += late
		worst = max(worst, late)
		system.Root.Stop(parent)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "late-µs/op")
	b.ReportMetric(float64(worst.Microseconds()), "worst-late-µs")
}
