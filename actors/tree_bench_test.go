package actors

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// BenchmarkAttemptTreeHeap measures the memory one live attempt tree
// holds: the attempt actor and its children (worker, lease watchdog,
// memory sampler, lease pusher, ledger writer) with their goroutines,
// while the worker runs.
//
// Method: a root supervisor with b.N slots runs b.N attempts against the
// fake host, whose worker run blocks until cancelled (the sampler's period
// is an hour, so no sample churns memory). Once every attempt has entered
// its run, the benchmark forces two garbage collections and takes
// HeapAlloc + StackInuse; the figure before the first submission, taken
// the same way, is subtracted, and the difference divided by b.N gives
// B/tree (heap-B/tree is the heap part alone). The attempts are then
// cancelled and torn down (against the fake) before the system stops.
//
//	go test -run '^$' -bench AttemptTreeHeap -benchtime 200x ./actors/
func BenchmarkAttemptTreeHeap(b *testing.B) {
	host := newFakeHost(b.TempDir())
	host.blockRun = true
	state := b.TempDir()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	cfg := AttemptConfig{StateRoot: state, WorkerBinary: "/proc/self/exe", WorkerDigest: "d", Clock: clock.System{}, SampleInterval: time.Hour}
	root := system.Root.Spawn(supervisor.Props(supervisor.Config{
		Slots: b.N, QueueLimit: 0, Cleaner: host, Ledgers: ledger.Store{Root: state},
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, sup *actor.PID) *actor.Props {
			return AttemptProps(d, subscriber, sup, cfg, Deps{Git: host, Docker: host})
		},
	}))
	finished := make(chan struct{}, b.N)
	subscriber := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(messages.AttemptFinished); ok {
			finished <- struct{}{}
		}
	}))
	dispatches := make([]*messages.Dispatch, b.N)
	for i := range dispatches {
		dispatches[i] = testDispatch(time.Now().Add(time.Hour))
	}
	before := liveBytes()
	b.ResetTimer()
	for _, d := range dispatches {
		res, err := system.Root.RequestFuture(root, messages.SubmitAttempt{Dispatch: d, Subscriber: subscriber}, within).Result()
		if err != nil || !res.(messages.SubmitReply).Accepted {
			b.Fatalf("submit: %v %+v", err, res)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for host.called("run") < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d workers running after a minute", host.called("run"), b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	after := liveBytes()
	b.ReportMetric(float64(after.total-before.total)/float64(b.N), "B/tree")
	b.ReportMetric(float64(after.heap-before.heap)/float64(b.N), "heap-B/tree")
	for _, d := range dispatches {
		system.Root.Send(root, messages.CancelAttempt{AttemptID: d.AttemptID(), Reason: "benchmark over"})
	}
	for range dispatches {
		select {
		case <-finished:
		case <-time.After(time.Minute):
			b.Fatal("the attempts did not finish after cancellation")
		}
	}
	_ = os.RemoveAll(state)
}

type memFigure struct{ heap, total uint64 }

// liveBytes is the live heap and the goroutine stacks after two forced
// collections.
func liveBytes() memFigure {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return memFigure{heap: m.HeapAlloc, total: m.HeapAlloc + m.StackInuse}
}
