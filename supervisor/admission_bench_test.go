package supervisor

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/messages"
)

// BenchmarkAdmissionRate measures the root supervisor's in-process
// admission rate: how many SubmitAttempt messages per second it decides.
//
// Method: a supervisor with one slot and a queue of b.N (no preflight
// capacity source, fake attempts that do nothing) receives b.N
// submissions of distinct, valid dispatches, all sent at once by one
// driver actor (ctx.Request, no futures); the clock runs from the first
// send to the last SubmitReply. The first submission starts an attempt,
// every other one is admitted into the queue, so this is the cost of the
// supervisor's admission itself (validation, duplicate check, queueing,
// the reply), not of starting attempts. The metric admissions/s is b.N
// divided by that time.
//
//	go test -run '^$' -bench AdmissionRate -benchtime 200000x ./supervisor/
func BenchmarkAdmissionRate(b *testing.B) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	root := system.Root.Spawn(Props(Config{
		Slots: 1, QueueLimit: b.N,
		NewAttempt: func(d *messages.Dispatch, _ messages.SandboxUser, subscriber, _ *actor.PID) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return &fakeAttempt{d: d, subscriber: subscriber} })
		},
	}))
	dispatches := make([]*messages.Dispatch, b.N)
	for i := range dispatches {
		dispatches[i] = dispatch()
	}
	sink := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	done := make(chan int, 1)
	received := 0 // touched only by the driver's Receive
	b.ResetTimer()
	start := time.Now()
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			for _, d := range dispatches {
				ctx.Request(root, messages.SubmitAttempt{Dispatch: d, Subscriber: sink})
			}
		case messages.SubmitReply:
			if !msg.Accepted {
				b.Errorf("refused: %s: %s", msg.Code, msg.Message)
			}
			received++
			if received == len(dispatches) {
				done <- received
			}
		}
	}))
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "admissions/s")
}
