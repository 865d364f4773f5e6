package supervisor

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/images/collector"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/messages"
)

// fakeCollector answers CollectNow with a report naming how many times it
// started, and panics on panicNow.
func fakeCollector(starts *atomic.Int32) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			starts.Add(1)
		case collector.CollectNow:
			ctx.Respond(collector.CollectReply{Report: imagegc.Report{DryRun: msg.DryRun, FreedBytes: int64(starts.Load())}})
		case panicNow:
			panic("collector failed on purpose")
		}
	})
}

func collect(t *testing.T, system *actor.ActorSystem, root *actor.PID) collector.CollectReply {
	t.Helper()
	res, err := system.Root.RequestFuture(root, collector.CollectNow{DryRun: true}, within).Result()
	require.NoError(t, err)
	return res.(collector.CollectReply)
}

// The image collector is the supervisor's child: requests reach it through
// the root, it shows in the tree, and a panic restarts it.
func TestCollectorRunsUnderTheSupervisor(t *testing.T) {
	sys := actortest.NewSystem(t)
	sys.AllowFailures(func(reason any) bool { return reason == "collector failed on purpose" })
	system := sys.ActorSystem
	var starts atomic.Int32
	root := sys.Spawn(Props(Config{Slots: 1, Clock: sys.Clock, Collector: fakeCollector(&starts)}))

	reply := collect(t, system, root)
	require.NoError(t, reply.Err)
	assert.True(t, reply.Report.DryRun, "the request is forwarded as it is")
	assert.Equal(t, int64(1), reply.Report.FreedBytes)

	res, err := system.Root.RequestFuture(root, messages.Inspect{}, within).Result()
	require.NoError(t, err)
	var gc string
	for _, child := range res.(messages.InspectReply).Children {
		if strings.HasPrefix(child, root.GetId()+"/"+collector.Kind) {
			gc = child
		}
	}
	require.NotEmpty(t, gc, "the collector is in the supervision tree")

	system.Root.Send(actor.NewPID(system.Address(), gc), panicNow{})
	require.Eventually(t, func() bool { return starts.Load() == 2 }, within, 5*time.Millisecond, "restarted after a panic")
	assert.Equal(t, int64(2), collect(t, system, root).Report.FreedBytes, "the restarted collector answers")
}

func TestCollectRequestWithoutCollector(t *testing.T) {
	sys := actortest.NewSystem(t)
	root := sys.Spawn(Props(Config{Slots: 1, Clock: sys.Clock}))
	assert.ErrorIs(t, collect(t, sys.ActorSystem, root).Err, errNoCollector)
}
