//go:build !race

// The benchmark runs many cluster members in this one process, which the
// race detector cannot run cleanly: protoactor-go's cluster races with
// itself (docs/fleet.md). It is built only without -race; the fleet's
// tests run the cluster in `forged daemon` processes instead.

package fleet_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// BenchmarkPlacement measures one placement (a dispatch left to the fleet,
// submitted to one member, placed and forwarded) with N
// members in this process on one loopback etcd, fake runners behind them.
// It reports the time the members took to see each other too.
func BenchmarkPlacement(b *testing.B) {
	sizes := []int{3, 10}
	if raw := os.Getenv("FORGED_FLEET_BENCH_MEMBERS"); raw != "" { // e.g. 3,10,50
		sizes = sizes[:0]
		for _, f := range strings.Split(raw, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("FORGED_FLEET_BENCH_MEMBERS: %q", raw)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
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
			waitDirectory(b, members[0], time.Duration(n)*10*time.Second, ids...)
			joined := time.Since(start)
			// etcd's load with the fleet idle: the gRPC requests it
			// handled over a window, per member and second.
			const window = 10 * time.Second
			before := etcdRequests(b, etcd.Endpoint())
			time.Sleep(window) // measuring a rate over wall time
			perMember := (etcdRequests(b, etcd.Endpoint()) - before) / window.Seconds() / float64(n)
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
			b.ReportMetric(perMember, "etcd-req/s/member")
			// A member leaves (graceful): how long until the first
			// member's directory no longer lists it.
			leaving := members[n-1]
			left := time.Now()
			leaving.Leave()
			waitDirectory(b, members[0], time.Minute, ids[:n-1]...)
			b.ReportMetric(time.Since(left).Seconds(), "s-to-drop-a-leaver")
		})
	}
}

// join joins a member and leaves the fleet when the test ends.
func join(t testing.TB, cfg fleet.Config, local fleet.Local) *fleet.Member {
	t.Helper()
	m, err := fleet.Join(cfg, local)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Cleanup(m.Leave)
	return m
}

// waitDirectory waits (up to deadline) until m's directory lists exactly
// the runner ids want, each answering, and returns how long that took.
func waitDirectory(t testing.TB, m *fleet.Member, deadline time.Duration, want ...string) time.Duration {
	t.Helper()
	start := time.Now()
	var last []string
	for time.Since(start) < deadline {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		dir := m.Directory(ctx)
		cancel()
		last = last[:0]
		got := map[string]bool{}
		for _, st := range dir {
			if st.GetError() == "" {
				got[st.GetRunnerId()] = true
				last = append(last, st.GetRunnerId())
			} else {
				last = append(last, "error:"+st.GetError())
			}
		}
		match := len(dir) == len(want)
		for _, w := range want {
			match = match && got[w]
		}
		if match {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("directory of %s did not become %v within %s; last %v", m.Address(), want, deadline, last)
	return 0
}

// etcdRequests is the number of gRPC requests etcd at endpoint has
// received (its grpc_server_msg_received_total counters, summed: unary requests and stream messages such as lease keep-alives).
func etcdRequests(t testing.TB, endpoint string) float64 {
	t.Helper()
	res, err := http.Get(endpoint + "/metrics")
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	defer res.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			total += v
		}
	}
	if total == 0 {
		t.Fatal("etcd reported no gRPC requests")
	}
	return total
}
