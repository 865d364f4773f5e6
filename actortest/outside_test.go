package actortest_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
)

// The tests of package actortest_test are written as another team's
// module would write them: with the harness's exported names only, never
// an internal package of forged (which a module outside forged cannot
// import). TestTheExternalTestsImportNothingInternal keeps them so.

// ticker sends its subscriber the clock's time every period, as a
// timer-using actor of another team would, on the Clock it is given.
type ticker struct {
	clk        actortest.Clock
	period     time.Duration
	subscriber *actor.PID
	timer      actortest.Timer
}

type tick struct{ At time.Time }

func (k *ticker) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		k.arm(ctx)
	case tick:
		ctx.Send(k.subscriber, tick{At: k.clk.Now()})
		k.arm(ctx)
	case *actor.Stopping:
		k.timer.Stop()
	}
}

func (k *ticker) arm(ctx actor.Context) {
	self, system := ctx.Self(), ctx.ActorSystem()
	k.timer = k.clk.AfterFunc(k.period, func() { system.Root.Send(self, tick{}) })
}

func TestAnOutsideTestRunsOnItsOwnManualClock(t *testing.T) {
	start := time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)
	clk := actortest.NewManualClock(start)
	sys := actortest.NewSystem(t, actortest.WithClock(clk))
	require.Same(t, clk, sys.Clock)
	probe := sys.NewProbe()
	sys.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &ticker{clk: clk, period: time.Minute, subscriber: probe.PID()}
	}))

	actortest.ExpectNoMessage[tick](t, probe, 59*time.Second)
	clk.AdvanceSync(time.Second)
	assert.Equal(t, start.Add(time.Minute), actortest.Expect[tick](t, probe, actortest.DefaultWithin).At)
	sys.Advance(time.Minute)
	assert.Equal(t, start.Add(2*time.Minute), actortest.Expect[tick](t, probe, actortest.DefaultWithin).At)
	assert.Equal(t, start.Add(2*time.Minute), clk.Now())
}

func TestTheExternalTestsImportNothingInternal(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	checked := 0
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		if f.Name.Name != "actortest_test" {
			continue
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			assert.False(t, strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal"),
				"%s imports %s: a module outside forged could not", name, path)
		}
	}
	assert.GreaterOrEqual(t, checked, 3)
}
