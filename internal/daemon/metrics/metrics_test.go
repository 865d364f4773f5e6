package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// manualNow is a settable clock for the timed observations.
type manualNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualNow) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestKindOf(t *testing.T) {
	for id, want := range map[string]string{
		"supervisor":                           "supervisor",
		"supervisor/attempt-0123abcd":          "attempt",
		"supervisor/attempt-01/build$12":       "build",
		"supervisor/reaper$3":                  "reaper",
		"$42":                                  "anonymous",
		"supervisor/attempt-01/worker$7":       "worker",
		"supervisor/attempt-01/lease-pusher$9": "lease-pusher",
	} {
		assert.Equal(t, want, KindOf(id), id)
	}
}

func TestKindsAreBounded(t *testing.T) {
	m := New()
	for i := 0; i < maxKinds+10; i++ {
		m.kind(strings.Repeat("k", i+1))
	}
	assert.Equal(t, "other", m.kind("one-too-many"))
	assert.Equal(t, "k", m.kind("k"))
}

func TestOutcomesSubmissionsAndReaperRounds(t *testing.T) {
	clock := &manualNow{t: time.Unix(1_800_000_000, 0)}
	m := New(WithNow(clock.now))
	m.Submitted(messages.SubmitReply{Accepted: true})
	m.Submitted(messages.SubmitReply{Accepted: true, Queued: true})
	m.Submitted(messages.SubmitReply{Code: "capacity_exhausted"})
	m.Finished(messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusSucceeded, PeakMemoryBytes: 64 << 20})
	m.Finished(messages.AttemptOutcome{AttemptID: "b", Status: messages.StatusFailed, Code: "sandbox_task_failed"})
	m.ReaperRound(reaper.Round{Reaped: []string{"x"}, Removed: make([]reaper.Object, 3), Degraded: []string{"d1", "d2"}}, nil)
	clock.advance(time.Minute)
	m.ReaperRound(reaper.Round{}, assert.AnError)

	assert.Equal(t, 1.0, testutil.ToFloat64(m.submissions.WithLabelValues("accepted", "")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.submissions.WithLabelValues("queued", "")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.submissions.WithLabelValues("refused", "capacity_exhausted")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.finished.WithLabelValues("succeeded", "")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.finished.WithLabelValues("failed", "sandbox_task_failed")))
	assert.Equal(t, 1, testutil.CollectAndCount(m.peakMemory))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reaperRounds.WithLabelValues("ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reaperRounds.WithLabelValues("failed")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reaperItems.WithLabelValues("attempt")))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.reaperItems.WithLabelValues("object")))
	assert.Equal(t, 1_800_000_000.0, testutil.ToFloat64(m.reaperLast.WithLabelValues("ok")))
	assert.Equal(t, 1_800_000_060.0, testutil.ToFloat64(m.reaperLast.WithLabelValues("failed")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.reaperLeft), "a failed round keeps the last count of leaks left")
	m.ReaperRound(reaper.Round{}, nil)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.reaperLeft))
}

func TestImageCollections(t *testing.T) {
	m := New()
	m.ImageCollection("timer", imagegc.Report{Removed: make([]imagegc.Decision, 2), Dangling: make([]imagegc.Image, 1), FreedBytes: 3 << 20}, nil)
	m.ImageCollection("request", imagegc.Report{DryRun: true, Removed: make([]imagegc.Decision, 5)}, nil)
	m.ImageCollection("disk_low", imagegc.Report{}, assert.AnError)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.gcRuns.WithLabelValues("timer", "ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.gcRuns.WithLabelValues("disk_low", "failed")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.gcRuns.WithLabelValues("request", "ok")), "a dry run removes nothing")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.gcRemoved))
	assert.Equal(t, float64(3<<20), testutil.ToFloat64(m.gcFreed))
}

func TestSnapshotGaugesIncludeTheHostsAvailability(t *testing.T) {
	m := New()
	snap := messages.Snapshot{Slots: 3, Queued: 1, Attempts: []string{"a"}}
	var mu sync.Mutex
	m.WatchSnapshot(func() (messages.Snapshot, error) { mu.Lock(); defer mu.Unlock(); return snap, nil })
	expo := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	body := expo()
	assert.Contains(t, body, "forged_slots_total 3")
	assert.Contains(t, body, "forged_slots_used 1")
	assert.NotContains(t, body, "forged_host_available", "no preflight, no availability claimed")

	mu.Lock()
	snap.Preflight = &messages.HostReport{Available: false, Code: "docker_disk_low", Capacity: 0}
	mu.Unlock()
	body = expo()
	assert.Contains(t, body, `forged_host_available{code="docker_disk_low"} 0`)
	assert.Contains(t, body, "forged_host_capacity 0")

	mu.Lock()
	snap.Preflight = &messages.HostReport{Available: true, Capacity: 2}
	mu.Unlock()
	body = expo()
	assert.Contains(t, body, `forged_host_available{code=""} 1`)
	assert.Contains(t, body, "forged_host_capacity 2")
}

func TestPhaseDurationsAreTimedBetweenChanges(t *testing.T) {
	clk := &manualNow{t: time.Unix(1000, 0)}
	m := New(WithNow(clk.now))
	m.phaseChanged("a", messages.PhasePreparing)
	clk.advance(2 * time.Second)
	m.phaseChanged("a", messages.PhaseBuilding)
	clk.advance(3 * time.Second)
	m.phaseChanged("a", messages.PhaseBuilding) // a repeat is no change
	clk.advance(1 * time.Second)
	m.Finished(messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusSucceeded})
	m.Finished(messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusSucceeded}) // the second end observes nothing

	assert.Equal(t, 2, testutil.CollectAndCount(m.phases))
	timeline := m.Timeline("a")
	require.Len(t, timeline, 2)
	assert.Equal(t, PhaseSpan{Phase: "preparing", Start: time.Unix(1000, 0), Seconds: 2}, timeline[0])
	assert.Equal(t, PhaseSpan{Phase: "building", Start: time.Unix(1002, 0), Seconds: 4}, timeline[1])
	assert.Empty(t, m.Timeline("unknown"))
	preparing := histogramOf(t, m, "forged_attempt_phase_duration_seconds", "phase", "preparing")
	assert.Equal(t, uint64(1), preparing.GetSampleCount())
	assert.Equal(t, 2.0, preparing.GetSampleSum())
	building := histogramOf(t, m, "forged_attempt_phase_duration_seconds", "phase", "building")
	assert.Equal(t, 4.0, building.GetSampleSum())
}

// TestActorMetricsThroughInstrumentedProps instruments only a supervisor
// stand-in: its build child is instrumented through the spawn, asks for the
// permit, builds, panics once (a restart) and receives a message once
// stopped (a dead letter).
func TestActorMetricsThroughInstrumentedProps(t *testing.T) {
	clk := &manualNow{t: time.Unix(1000, 0)}
	m := New(WithNow(clk.now))
	system := actor.NewActorSystem()
	defer system.Shutdown()
	stopDead := m.WatchDeadLetters(system)
	defer stopDead()

	waiters, done := make(chan *actor.PID, 1), make(chan struct{})
	var permitWaiter *actor.PID // the supervisor stand-in's state
	supervisorProps := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case spawnBuild:
			ctx.SpawnPrefix(actor.PropsFromFunc(func(ctx actor.Context) {
				switch ctx.Message().(type) {
				case *actor.Started:
					ctx.Request(ctx.Parent(), messages.AcquireBuildPermit{AttemptID: "a", Key: "k"})
				case messages.BuildPermitGranted:
					ctx.Send(ctx.Parent(), messages.BuildDone{ImageID: "sha256:x", CacheHit: false})
				case boom:
					panic("boom")
				}
			}), "build")
		case messages.AcquireBuildPermit:
			if permitWaiter == nil { // the restarted build asks again: ignored
				permitWaiter = ctx.Sender()
				waiters <- permitWaiter
			}
		case grant:
			ctx.Send(permitWaiter, messages.BuildPermitGranted{})
		case messages.BuildDone:
			close(done)
		case forwardBoom:
			ctx.Send(permitWaiter, boom{})
		}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)))
	sup := system.Root.Spawn(m.Instrument(supervisorProps, "supervisor"))
	system.Root.Send(sup, spawnBuild{})
	build := <-waiters
	clk.advance(5 * time.Second)
	system.Root.Send(sup, grant{})
	<-done
	system.Root.Send(sup, forwardBoom{})
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.restarts.WithLabelValues("build")) == 1 }, 5*time.Second, 5*time.Millisecond)

	stats, ok := m.ActorStats(build.GetId())
	require.True(t, ok)
	assert.Equal(t, uint64(1), stats.Restarts)
	var kinds []string
	for _, c := range stats.Recent {
		kinds = append(kinds, c.Kind)
		assert.Positive(t, c.Count, c.Kind)
	}
	assert.Contains(t, kinds, "messages.BuildPermitGranted")
	assert.Contains(t, kinds, "*actor.Restarting")
	assert.LessOrEqual(t, len(stats.Recent), recentMessages)
	assert.GreaterOrEqual(t, stats.MessagesOut, uint64(2))

	// A message to a stopped actor is a dead letter of its kind.
	require.NoError(t, system.Root.StopFuture(build).Wait())
	system.Root.Send(build, "late")
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.deadLetters.WithLabelValues("build")) >= 1 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.actorsLive.WithLabelValues("build")) == 0 }, 5*time.Second, 5*time.Millisecond)
	_, ok = m.ActorStats(build.GetId())
	assert.False(t, ok, "a stopped actor's record is dropped")

	wait := histogramOf(t, m, "forged_build_permit_wait_seconds", "", "")
	assert.Equal(t, uint64(1), wait.GetSampleCount())
	assert.Equal(t, 5.0, wait.GetSampleSum())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.buildCache.WithLabelValues("miss")))
	duration := histogramOf(t, m, "forged_build_duration_seconds", "result", "miss")
	assert.Equal(t, 5.0, duration.GetSampleSum())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.actorsLive.WithLabelValues("supervisor")))
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.messagesOut.WithLabelValues("build")), 2.0)     // the request and BuildDone
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.messagesIn.WithLabelValues("supervisor")), 5.0) // spawnBuild, the request, grant, BuildDone, forwardBoom
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.mailbox.WithLabelValues("supervisor")) == 0 }, 5*time.Second, 5*time.Millisecond)
}

type (
	spawnBuild  struct{}
	grant       struct{}
	boom        struct{}
	forwardBoom struct{}
)

// histogramOf gathers the registry and returns the histogram named name
// whose label has value (any, when label is empty).
func histogramOf(t *testing.T, m *Metrics, name, label, value string) *dto.Histogram {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			if label == "" {
				return metric.GetHistogram()
			}
			for _, l := range metric.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return metric.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no histogram %s{%s=%q}", name, label, value)
	return nil
}

func TestTCPHandlerRequiresTheBearerToken(t *testing.T) {
	m := New()
	token := "0123456789abcdef-token"
	srv := httptest.NewServer(m.TCPHandler(token))
	defer srv.Close()
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, "Bearer " + token + "x", "bearer " + token} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, auth)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	// Nothing but /metrics is served, even with the token.
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/v1/inspect", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res2.Body.Close()
	assert.Equal(t, http.StatusNotFound, res2.StatusCode)
}

func TestTimelinesAreBounded(t *testing.T) {
	m := New()
	for i := 0; i < timelinesKept+5; i++ {
		m.phaseChanged(fmt.Sprint(i), messages.PhasePreparing)
	}
	assert.Empty(t, m.Timeline("0"), "the oldest timelines are dropped")
	assert.Len(t, m.Timeline(fmt.Sprint(timelinesKept+4)), 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.timelines, timelinesKept)
}

// TestRecentMessagesAreCountedWithoutPolling: repeats of a kind count up
// in one entry (moved to the end when seen again), the console's polling
// is left out, and the list keeps only the latest kinds.
func TestRecentMessagesAreCountedWithoutPolling(t *testing.T) {
	var r actorRecord
	for range 3 {
		r.received(messages.AttemptPhaseChanged{})
		r.received(messages.Inspect{})
		r.received(messages.SnapshotRequest{})
	}
	r.received(&actor.Started{})
	r.received(messages.AttemptPhaseChanged{})
	assert.Equal(t, []messages.MessageCount{{Kind: "*actor.Started", Count: 1}, {Kind: "messages.AttemptPhaseChanged", Count: 4}}, r.stats().Recent)

	for i := range recentMessages + 3 {
		r.received(fmt.Sprint(i)) // string: one kind
		r.received(i)             // int
		r.received(float64(i))    // float64
		r.received([]int{i})
		r.received(map[int]int{i: i})
		r.received(uint(i))
		r.received(int8(i))
	}
	recent := r.stats().Recent
	require.Len(t, recent, recentMessages)
	assert.Equal(t, "messages.AttemptPhaseChanged", recent[0].Kind, "the least recently seen kinds are dropped first")
	assert.Equal(t, messages.MessageCount{Kind: "int8", Count: recentMessages + 3}, recent[len(recent)-1])
}

// TestMemorySeriesIsKeptPerAttemptAndBounded: the sampler's readings reach
// the series through the receive middleware, only for attempts with a
// timeline, and only the last memorySamplesKept are kept.
func TestMemorySeriesIsKeptPerAttemptAndBounded(t *testing.T) {
	m := New()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	got := make(chan struct{}, 1)
	pid := system.Root.Spawn(m.Instrument(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			got <- struct{}{}
		}
	}), "attempt"))
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(id string, i int) messages.MemorySampled {
		return messages.MemorySampled{AttemptID: id, LimitBytes: 64 << 20, Sample: messages.MemorySample{At: at.Add(time.Duration(i) * time.Second), UsageBytes: uint64(i) << 20}}
	}
	system.Root.Send(pid, sample("unknown", 1))
	m.phaseChanged("a", messages.PhaseRunning)
	for i := range memorySamplesKept + 5 {
		system.Root.Send(pid, sample("a", i))
	}
	system.Root.Send(pid, "done")
	<-got

	_, ok := m.MemorySeries("unknown")
	assert.False(t, ok, "an attempt without a timeline keeps no series")
	series, ok := m.MemorySeries("a")
	require.True(t, ok)
	assert.Equal(t, "a", series.AttemptID)
	assert.Equal(t, int64(64<<20), series.LimitBytes)
	require.Len(t, series.Samples, memorySamplesKept)
	assert.Equal(t, uint64(5)<<20, series.Samples[0].UsageBytes, "the oldest readings are dropped")
	assert.Equal(t, at.Add(time.Duration(memorySamplesKept+4)*time.Second), series.Samples[len(series.Samples)-1].At)

	// The series goes with the attempt's timeline.
	for i := range timelinesKept {
		m.phaseChanged(fmt.Sprint("b", i), messages.PhasePreparing)
	}
	_, ok = m.MemorySeries("a")
	assert.False(t, ok, "the oldest attempts' series are dropped with their timelines")
}
