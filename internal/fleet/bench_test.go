package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// BenchmarkPlacement measures one placement (a dispatch left to the fleet,
// submitted to one member, placed by free slots and forwarded) with N
// members in this process on one loopback etcd, fake runners behind them.
// It reports the time the members took to see each other too.
func BenchmarkPlacement(b *testing.B) {
	for _, n := range []int{3, 10} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			etcd := etcdtest.Start(b)
			ca := newTestCA(b)
			name := fleetName()
			var members []*fleet.Member
			var ids []string
			start := time.Now()
			for i := range n {
				r := newFakeRunner(1 << 20)
				r.finish = true
				cfg := ca.config(b, etcd.Endpoint(), name, fmt.Sprintf("m%d", i))
				cfg.Placement = true
				members = append(members, join(b, cfg, r))
				ids = append(ids, r.id)
			}
			waitDirectory(b, members[0], time.Minute, ids...)
			joined := time.Since(start)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			raws := make([][]byte, b.N)
			for i := range raws {
				_, raws[i] = dispatchForB(b, fleet.AnyMember)
			}
			b.ResetTimer()
			for i := range b.N {
				if reply, _, err := members[0].Submit(ctx, raws[i]); err != nil || !reply.Accepted {
					b.Fatalf("placement %d: %+v, %v", i, reply, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(joined.Seconds(), "s-to-join") // after ResetTimer, which drops reported metrics
		})
	}
}
