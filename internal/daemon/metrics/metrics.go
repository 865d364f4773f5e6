// Package metrics is forged's Prometheus instrumentation: one registry per
// runner (never the global default), the domain metrics (attempts by
// outcome and code, phase durations, slots and queue, the build permit,
// builds, the reaper, peak memory) and per actor kind mailbox depth,
// messages in and out, restarts and dead letters.
//
// The actor metrics come from Instrument, which clones an actor's Props
// with a counting mailbox, receive and send middleware and a context
// decorator that instruments every child the actor spawns in turn; the
// original Props are never changed. The domain metrics that travel as
// messages (phase changes, the permit, build results) are read off the
// same middleware; outcomes, reaper rounds and the slots are reported by
// their owners (the runner and the supervisor's reaper).
//
// For the live console it also keeps, bounded, each live actor's counters
// and recent message kinds (without the console's own polling), and per
// attempt its phase timeline and its memory sampler's last readings
// (messages.MemorySampled, read off the same middleware); see console.go.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// Namespace prefixes every metric.
const Namespace = "forged"

// maxKinds bounds the actor kind label; further kinds count as "other".
const maxKinds = 64

// Metrics is one runner's instrumentation. Its methods are safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	now      func() time.Time

	submissions  *prometheus.CounterVec
	finished     *prometheus.CounterVec
	phases       *prometheus.HistogramVec
	permitWait   prometheus.Histogram
	buildCache   *prometheus.CounterVec
	buildTime    *prometheus.HistogramVec
	reaperRounds *prometheus.CounterVec
	reaperItems  *prometheus.CounterVec
	reaperLast   *prometheus.GaugeVec
	reaperLeft   prometheus.Gauge
	held         prometheus.Gauge
	peakMemory   prometheus.Histogram
	gcRuns       *prometheus.CounterVec
	gcRemoved    prometheus.Counter
	gcFreed      prometheus.Counter

	actorsLive  *prometheus.GaugeVec
	mailbox     *prometheus.GaugeVec
	messagesIn  *prometheus.CounterVec
	messagesOut *prometheus.CounterVec
	restarts    *prometheus.CounterVec
	deadLetters *prometheus.CounterVec

	mu          sync.Mutex
	kinds       map[string]bool
	phaseSince  map[string]phaseMark // attempt id → its current phase and since when
	permitAsked map[string]time.Time // requester pid → when it asked
	buildStart  map[string]time.Time // build actor pid → when it started
	actors      map[string]*actorRecord
	timelines   map[string][]PhaseSpan
	memory      map[string]messages.MemorySeries // attempt id → its sampler's last readings
	// timelineOrder is the attempts with a timeline, oldest first.
	timelineOrder []string
}

type phaseMark struct {
	phase string
	since time.Time
}

// Option tunes New.
type Option func(*Metrics)

// WithNow sets the clock that times phases, permit waits and builds.
func WithNow(now func() time.Time) Option { return func(m *Metrics) { m.now = now } }

// New returns a runner's metrics on a registry of their own, with the Go
// runtime and process collectors.
func New(opts ...Option) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(), now: time.Now,
		kinds: map[string]bool{}, phaseSince: map[string]phaseMark{},
		permitAsked: map[string]time.Time{}, buildStart: map[string]time.Time{},
		actors: map[string]*actorRecord{}, timelines: map[string][]PhaseSpan{}, memory: map[string]messages.MemorySeries{},
	}
	for _, o := range opts {
		o(m)
	}
	durations := prometheus.ExponentialBuckets(0.05, 2, 14) // 50 ms … ~7 min
	m.submissions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "attempts_submitted_total",
		Help: "Submitted attempts by result (accepted, queued, refused) and refusal code."}, []string{"result", "code"})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "attempts_finished_total",
		Help: "Finished attempts by outcome status and failure code (empty on success)."}, []string{"status", "code"})
	m.phases = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "attempt_phase_duration_seconds",
		Help: "Time attempts spent in each phase.", Buckets: durations}, []string{"phase"})
	m.permitWait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "build_permit_wait_seconds",
		Help: "Time from asking for the global build permit to holding it.", Buckets: durations})
	m.buildCache = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "build_cache_total",
		Help: "Sandbox image lookups by result: hit (a cached image) or miss (built)."}, []string{"result"})
	m.buildTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "build_duration_seconds",
		Help: "Time from a build actor's start to its result, by result (hit, miss, failed).", Buckets: durations}, []string{"result"})
	m.reaperRounds = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "reaper_rounds_total",
		Help: "Reaper rounds by result (ok, failed)."}, []string{"result"})
	m.reaperItems = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "reaper_removals_total",
		Help: "What reaper rounds removed: reaped attempt ledgers, objects removed by label, degraded attempts."}, []string{"kind"})
	m.reaperLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "reaper_last_round_timestamp_seconds",
		Help: "When the last reaper round of each result (ok, failed) ended, in Unix seconds."}, []string{"result"})
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "admission_held",
		Help: "1 while the runner admits no new work because an outside authority holds admission (a fleet member cut off from etcd), else 0."})
	m.reaperLeft = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "reaper_degraded_attempts",
		Help: "Attempts whose resources the last reaper round could not remove (retried next round): leaks left on the host."})
	m.gcRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "image_gc_runs_total",
		Help: "Image collections by reason (timer, disk_low, request) and result (ok, failed); dry runs are not counted."}, []string{"reason", "result"})
	m.gcRemoved = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "image_gc_removed_images_total",
		Help: "Images the image collector removed (tagged and dangling)."})
	m.gcFreed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "image_gc_freed_bytes_total",
		Help: "Bytes the removed images held (an upper bound: shared layers count once per image)."})
	m.peakMemory = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "attempt_peak_memory_bytes",
		Help: "Peak memory of finished attempts' workers.", Buckets: prometheus.ExponentialBuckets(8<<20, 2, 12)}) // 8 MiB … 16 GiB
	m.actorsLive = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "actors",
		Help: "Live actors by kind."}, []string{"kind"})
	m.mailbox = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "actor_mailbox_depth",
		Help: "Messages waiting in the mailboxes of the actors of a kind."}, []string{"kind"})
	m.messagesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "actor_messages_received_total",
		Help: "Messages posted to the mailboxes of the actors of a kind."}, []string{"kind"})
	m.messagesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "actor_messages_sent_total",
		Help: "Messages sent by the actors of a kind."}, []string{"kind"})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "actor_restarts_total",
		Help: "Restarts of the actors of a kind."}, []string{"kind"})
	m.deadLetters = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "actor_dead_letters_total",
		Help: "Messages that reached no actor, by the kind of the actor they were sent to."}, []string{"kind"})
	m.registry.MustRegister(m.submissions, m.finished, m.phases, m.permitWait, m.buildCache, m.buildTime,
		m.reaperRounds, m.reaperItems, m.reaperLast, m.reaperLeft, m.held, m.peakMemory, m.gcRuns, m.gcRemoved, m.gcFreed, m.actorsLive, m.mailbox, m.messagesIn, m.messagesOut, m.restarts, m.deadLetters,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: Namespace}))
	return m
}

// Registry is the metrics' own registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Submitted counts one submission's reply.
func (m *Metrics) Submitted(reply messages.SubmitReply) {
	switch {
	case !reply.Accepted:
		m.submissions.WithLabelValues("refused", reply.Code).Inc()
	case reply.Queued:
		m.submissions.WithLabelValues("queued", "").Inc()
	default:
		m.submissions.WithLabelValues("accepted", "").Inc()
	}
}

// AdmissionHeld records whether admission is held (Runner.HoldAdmission).
func (m *Metrics) AdmissionHeld(held bool) {
	if held {
		m.held.Set(1)
	} else {
		m.held.Set(0)
	}
}

// Finished counts one attempt's outcome and observes its peak memory.
func (m *Metrics) Finished(out messages.AttemptOutcome) {
	m.finished.WithLabelValues(out.Status, out.Code).Inc()
	if out.PeakMemoryBytes > 0 {
		m.peakMemory.Observe(float64(out.PeakMemoryBytes))
	}
	m.phaseEnded(out.AttemptID)
}

// ReaperRound counts one reaper round (a dry run is not counted).
func (m *Metrics) ReaperRound(round reaper.Round, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	} else {
		m.reaperLeft.Set(float64(len(round.Degraded)))
	}
	m.reaperRounds.WithLabelValues(result).Inc()
	m.reaperLast.WithLabelValues(result).Set(float64(m.now().UnixNano()) / 1e9)
	m.reaperItems.WithLabelValues("attempt").Add(float64(len(round.Reaped)))
	m.reaperItems.WithLabelValues("object").Add(float64(len(round.Removed)))
	m.reaperItems.WithLabelValues("degraded").Add(float64(len(round.Degraded)))
}

// ImageCollection counts one image collection (a dry run is not counted).
func (m *Metrics) ImageCollection(reason string, report imagegc.Report, err error) {
	if report.DryRun {
		return
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.gcRuns.WithLabelValues(reason, result).Inc()
	m.gcRemoved.Add(float64(len(report.Removed) + len(report.Dangling)))
	m.gcFreed.Add(float64(report.FreedBytes))
}

// phaseChanged ends the attempt's current phase (observing its duration)
// and starts the next.
func (m *Metrics) phaseChanged(attemptID, phase string) {
	now := m.now()
	m.mu.Lock()
	prev, ok := m.phaseSince[attemptID]
	if ok && prev.phase == phase {
		m.mu.Unlock()
		return // a repeat is no change
	}
	if phase == messages.PhaseFinished {
		delete(m.phaseSince, attemptID)
		m.recordPhaseLocked(attemptID, "", now)
	} else {
		m.phaseSince[attemptID] = phaseMark{phase: phase, since: now}
		m.recordPhaseLocked(attemptID, phase, now)
	}
	m.mu.Unlock()
	if ok {
		m.phases.WithLabelValues(prev.phase).Observe(now.Sub(prev.since).Seconds())
	}
}

// phaseEnded ends a finished attempt's last phase.
func (m *Metrics) phaseEnded(attemptID string) {
	now := m.now()
	m.mu.Lock()
	prev, ok := m.phaseSince[attemptID]
	delete(m.phaseSince, attemptID)
	if ok {
		m.recordPhaseLocked(attemptID, "", now)
	}
	m.mu.Unlock()
	if ok {
		m.phases.WithLabelValues(prev.phase).Observe(now.Sub(prev.since).Seconds())
	}
}

func (m *Metrics) permitRequested(requester string) {
	now := m.now()
	m.mu.Lock()
	if _, waiting := m.permitAsked[requester]; !waiting {
		m.permitAsked[requester] = now
	}
	m.mu.Unlock()
}

func (m *Metrics) permitGranted(holder string) {
	now := m.now()
	m.mu.Lock()
	asked, ok := m.permitAsked[holder]
	delete(m.permitAsked, holder)
	m.mu.Unlock()
	if ok {
		m.permitWait.Observe(now.Sub(asked).Seconds())
	}
}

func (m *Metrics) buildStarted(build string) {
	now := m.now()
	m.mu.Lock()
	if _, ok := m.buildStart[build]; !ok {
		m.buildStart[build] = now
	}
	m.mu.Unlock()
}

// buildFinished observes a build's result: "hit", "miss" or "failed".
func (m *Metrics) buildFinished(build, result string) {
	now := m.now()
	m.mu.Lock()
	started, ok := m.buildStart[build]
	delete(m.buildStart, build)
	m.mu.Unlock()
	if result != "failed" {
		m.buildCache.WithLabelValues(result).Inc()
	}
	if ok {
		m.buildTime.WithLabelValues(result).Observe(now.Sub(started).Seconds())
	}
}

// forget drops what is kept about a stopped actor.
func (m *Metrics) forget(pid string) {
	m.mu.Lock()
	delete(m.actors, pid)
	delete(m.permitAsked, pid)
	delete(m.buildStart, pid)
	m.mu.Unlock()
}
