package actors

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/forgedev/forged/internal/kit/clock"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/messages"
)

const kindSampler = "memory-sampler"

// Bounds of the sampler's calls.
const (
	// sampleTimeout bounds one round of readings.
	sampleTimeout = 5 * time.Second
	// releaseTimeout bounds the release (one kill call).
	releaseTimeout = 15 * time.Second
	// releaseWait is how long the worker waits for the host's release
	// after its output (StartPacket.ReleaseWaitMillis): enough for the
	// last reading and the release on a loaded machine; a missing release
	// only costs this much.
	releaseWait = 5 * time.Second
)

// sampleStep names a round's off-mailbox work.
const sampleStep = "memory sample"

// Container roles the sampler knows.
const (
	roleAgent = "agent"
)

// The worker's lifecycle events the sampler acts on.
const (
	outputWrittenEvent = "output_written"
)

// SampledContainer is one container of the attempt the sampler watches,
// keyed by its role ("agent" for the worker; services and the egress
// proxy when they land).
type SampledContainer struct {
	ID   string
	Name string
	Role string
	// LimitBytes is the container's memory limit (0 when unknown).
	LimitBytes int64
}

// KernelCounters opens a running container's kernel counters on this
// host. HostKernel is the real one; tests inject fakes.
type KernelCounters interface {
	Open(pid int, containerID string) (ContainerCounters, error)
}

// ContainerCounters reads one container's cgroup and its file systems.
type ContainerCounters interface {
	Read() (cgroups.Reading, error)
	StatFS(path string) (cgroups.FSUsage, error)
}

// CounterWatcher is ContainerCounters that watches the count of forks
// refused at pids.max more closely than the sampler's ticks
// (cgroups.Container has it): WatchEvents calls changed with the count
// each time it grows, until ctx ends or the cgroup is gone. A sandbox that
// dies whole at its pids limit (gVisor) takes its cgroup, and the count,
// with it well within a sampling interval.
type CounterWatcher interface {
	WatchEvents(ctx context.Context, changed func(pidsMaxEvents uint64)) error
}

// HostKernel reads the kernel's counters through this host's /proc and
// cgroup mounts: it works where forged runs on the engine's host with
// access to them (a rootful local engine); elsewhere Open fails and the
// sampler falls back to Engine API stats.
type HostKernel struct {
	Locator cgroups.Locator
}

// Open implements KernelCounters.
func (h HostKernel) Open(pid int, containerID string) (ContainerCounters, error) {
	c, err := h.Locator.Open(pid, containerID)
	if err != nil {
		return nil, err // not a typed nil
	}
	return c, nil
}

// watchedPaths are the worker's writable file systems the host statfs's
// through the container's root: the tmpfs /tmp and the workspace.
var watchedPaths = []string{"/tmp", messages.WorkspaceDir}

// PeakMemoryRequest asks the memory sampler for its report, after any
// reading in flight (and one closing reading) completed. Replied with
// SamplerReport.
type PeakMemoryRequest struct{}

// SamplerReport is the sampler's account: the telemetry record (nil when
// nothing was sampled), the agent container's kernel facts for the
// failure classification, and the worker's own resource report (nil when
// none arrived).
type SamplerReport struct {
	Telemetry *messages.SandboxTelemetry
	Kernel    dockerops.KernelFacts
	Worker    *messages.TaskResources
}

type sampleTick struct{}

// countersChanged: a container's count of forks refused at pids.max grew
// (CounterWatcher); the sampler keeps it and reads as soon as it can.
type countersChanged struct {
	id            string
	pidsMaxEvents uint64
}

// samplerState is one container's record.
type samplerState struct {
	SampledContainer
	counters  ContainerCounters // nil until opened, or when the kernel cannot be read
	fallback  string            // why the kernel counters cannot be read: Engine API stats instead
	openFails int               // rounds whose attempt to find the cgroup failed
	gone      bool              // the kernel counters were read and vanished: the container exited
	kernel    bool              // a kernel reading succeeded
	peakKnown bool              // ... with the kernel's own peak
	stats     bool              // an Engine API sample succeeded
	peak      uint64
	samples   int
	last      cgroups.Reading
	storage   map[string]messages.StorageObservation
	final     bool // the last reading (after the task) read the kernel counters
}

// probe is what one round does for one container, decided in Receive and
// carried out off the mailbox.
type probe struct {
	id       string
	counters ContainerCounters
	open     bool // find the cgroup first
}

// probeResult is one container's part of a round's result.
type probeResult struct {
	id         string
	opened     ContainerCounters
	openErr    error
	reading    *cgroups.Reading
	gone       bool
	storage    map[string]cgroups.FSUsage
	statsBytes uint64
	statsOK    bool
	failed     bool
}

type roundDone struct {
	results []probeResult
	final   bool
}

type releaseDone struct{ err, discardErr error }

// memorySampler watches the attempt's containers: on its own timer (re-
// armed after each round, so rounds never overlap), and once more when the
// worker announces its output (the last reading while the cgroup exists;
// then it releases the worker). Where the kernel counters can be read it
// keeps the kernel's own peak, OOM kills, pids.max events and CPU time,
// and statfs's the worker's file systems; elsewhere it samples Engine API
// stats. It also keeps the worker's task_resources report.
type memorySampler struct {
	attemptID  string
	docker     SamplerDocker
	kernel     KernelCounters
	clk        clock.Clock
	interval   time.Duration
	containers []*samplerState
	// discard, when set, ends the workspace's filesystem without writing
	// it back, just before the release (see release).
	discard func(context.Context) error

	runCtx       context.Context
	cancel       context.CancelFunc
	timer        clock.Timer
	busy         bool
	pending      bool // a round is wanted as soon as the one in flight ends
	finalWanted  bool // the worker's output is written: read, then release
	finalTaken   bool
	closing      bool // a report is requested: one closing round, then answer
	waiting      []*actor.PID
	released     string
	rounds       int
	failedRounds int
	first, last  time.Time
	worker       *messages.TaskResources
}

// newMemorySamplerProps samples the containers of one attempt; discard,
// when not nil, is called after the last reading and before the release
// (the workspace's filesystem, see VolumeStore.Discard).
func newMemorySamplerProps(attemptID string, docker SamplerDocker, kernel KernelCounters, clk clock.Clock, interval time.Duration, containers []SampledContainer,
	discard func(context.Context) error) *actor.Props {
	if kernel == nil {
		kernel = HostKernel{}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		s := &memorySampler{attemptID: attemptID, docker: docker, kernel: kernel, clk: clk, interval: interval, discard: discard}
		for _, c := range containers {
			s.containers = append(s.containers, &samplerState{SampledContainer: c, storage: map[string]messages.StorageObservation{}})
		}
		return s
	})
}

// forwardToSampler hands the sampler the worker events it acts on.
func forwardToSampler(ctx actor.Context, sampler *actor.PID, ev messages.Event) {
	if sampler != nil && (ev.EventType == outputWrittenEvent || ev.EventType == messages.TaskResourcesEvent) && ev.Role == "runner" {
		ctx.Send(sampler, WorkerOutput{Event: ev})
	}
}

func (s *memorySampler) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.runCtx, s.cancel = context.WithCancel(context.Background())
		s.round(ctx, false)
	case sampleTick:
		s.timer = nil
		if s.busy { // a tick already sent when an early round stopped the timer
			s.pending = true
			return
		}
		s.round(ctx, false)
	case countersChanged:
		if c := s.container(msg.id); c != nil && msg.pidsMaxEvents > c.last.PidsMaxEvents {
			// The kernel's counter only grows: a later reading has at least this.
			c.last.PidsMaxEvents, c.last.PidsKnown = msg.pidsMaxEvents, true
		}
		if s.busy || s.closing {
			s.pending = !s.closing
			return
		}
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.round(ctx, false)
	case WorkerOutput:
		s.onWorkerEvent(ctx, msg.Event)
	case roundDone:
		s.onRound(ctx, msg)
	case releaseDone:
		s.released = "released"
		if msg.err != nil {
			s.released = "release failed: " + msg.err.Error()
		}
		if msg.discardErr != nil {
			s.released += "; the workspace was not discarded: " + msg.discardErr.Error()
		}
	case asyncPanic:
		if msg.Step != sampleStep {
			s.released = "release failed: " + msg.Error()
			return
		}
		s.busy = false
		s.failedRounds++
		s.next(ctx)
	case PeakMemoryRequest:
		s.waiting = append(s.waiting, ctx.Sender())
		if !s.closing {
			s.closing = true
			if !s.busy {
				s.round(ctx, false)
			}
		}
	case *actor.Restarting, *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.cancel != nil {
			s.cancel()
		}
	case messages.Inspect:
		facts := map[string]string{
			"rounds":  strconv.Itoa(s.rounds),
			"failed":  strconv.Itoa(s.failedRounds),
			"final":   strconv.FormatBool(s.finalTaken),
			"release": s.released,
		}
		for _, c := range s.containers {
			facts[c.Role+".container"] = c.ID
			facts[c.Role+".peakBytes"] = strconv.FormatUint(c.peak, 10)
			facts[c.Role+".source"] = c.source()
		}
		ctx.Respond(messages.InspectReply{PID: ctx.Self().GetId(), Kind: kindSampler, Phase: "sampling", Facts: facts})
	}
}

func (s *memorySampler) onWorkerEvent(ctx actor.Context, ev messages.Event) {
	switch ev.EventType {
	case messages.TaskResourcesEvent:
		if s.worker != nil || ev.Data == nil {
			return // the first report counts
		}
		s.worker = decodeTaskResources(*ev.Data)
	case outputWrittenEvent:
		if s.finalWanted {
			return
		}
		s.finalWanted = true
		if !s.busy {
			s.round(ctx, true)
		}
	}
}

// maxReportedStorage bounds the file systems a worker report may list.
const maxReportedStorage = 8

// decodeTaskResources decodes the worker's task_resources data (bounded
// by the event's data bound), or returns nil when it is malformed.
func decodeTaskResources(data string) *messages.TaskResources {
	var r messages.TaskResources
	if json.Unmarshal([]byte(data), &r) != nil || len(r.Storage) > maxReportedStorage {
		return nil
	}
	return &r
}

// round starts one round of readings off the mailbox.
func (s *memorySampler) round(ctx actor.Context, final bool) {
	probes := make([]probe, 0, len(s.containers))
	for _, c := range s.containers {
		probes = append(probes, probe{id: c.ID, counters: c.counters, open: c.counters == nil && c.fallback == "" && !c.gone})
	}
	s.busy = true
	docker, kernel := s.docker, s.kernel
	runAsync(ctx, s.runCtx, sampleStep, func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, sampleTimeout)
		defer cancel()
		done := roundDone{final: final}
		for _, p := range probes {
			done.results = append(done.results, readContainer(callCtx, docker, kernel, p))
		}
		return done
	})
}

// readContainer reads one container: its kernel counters when they can be
// read, Engine API stats otherwise.
func readContainer(ctx context.Context, docker SamplerDocker, kernel KernelCounters, p probe) probeResult {
	res := probeResult{id: p.id}
	counters := p.counters
	if p.open {
		state, err := docker.InspectState(ctx, p.id)
		switch {
		case err != nil:
			res.failed = true
			return res
		case state.Running && state.Pid > 0:
			counters, res.openErr = kernel.Open(state.Pid, p.id)
			if res.openErr != nil {
				counters = nil
			}
			res.opened = counters
		}
	}
	if counters != nil {
		r, err := counters.Read()
		if err == nil {
			res.reading = &r
			res.storage = map[string]cgroups.FSUsage{}
			for _, path := range watchedPaths {
				if u, err := counters.StatFS(path); err == nil {
					res.storage[path] = u
				}
			}
			return res
		}
		if errors.Is(err, fs.ErrNotExist) {
			res.gone = true // the container exited: its cgroup is gone
			return res
		}
	}
	usage, err := docker.MemoryUsage(ctx, p.id)
	switch {
	case err != nil:
		res.failed = true
	case usage > 0: // a container that is not running reports 0: no sample
		res.statsBytes, res.statsOK = usage, true
	}
	return res
}

func (s *memorySampler) onRound(ctx actor.Context, msg roundDone) {
	s.busy = false
	now := s.clk.Now()
	succeeded, failed := false, false
	for _, r := range msg.results {
		c := s.container(r.id)
		if c == nil {
			continue
		}
		if r.opened != nil {
			c.counters = r.opened
			s.watch(ctx, c.ID, r.opened)
		}
		if r.openErr != nil {
			// A container just started can be between cgroups for a moment:
			// only a failure that persists makes stats the source for good
			// (the rounds in between use stats).
			if c.openFails++; c.openFails >= maxOpenFails {
				c.fallback = r.openErr.Error()
			}
		}
		switch {
		case r.reading != nil:
			s.sampled(ctx, c, now, r.reading.MemoryUsageBytes, r.reading.CPUThrottledNanos)
			succeeded = true
			c.kernel, c.samples, c.last = true, c.samples+1, *r.reading
			c.peakKnown = c.peakKnown || r.reading.PeakKnown
			c.peak = max(c.peak, r.reading.MemoryPeakBytes)
			for path, u := range r.storage {
				c.observe(path, u)
			}
			c.final = c.final || msg.final
		case r.gone:
			c.gone, c.counters = true, nil
		case r.statsOK:
			s.sampled(ctx, c, now, r.statsBytes, 0)
			succeeded = true
			c.stats, c.samples = true, c.samples+1
			c.peak = max(c.peak, r.statsBytes)
		case r.failed:
			failed = true
		}
	}
	switch {
	case succeeded:
		s.rounds++
		if s.first.IsZero() {
			s.first = now
		}
		s.last = now
	case failed:
		s.failedRounds++
	}
	if msg.final {
		s.finalTaken = true
		s.release(ctx)
	}
	s.next(ctx)
}

// sampled tells the attempt of one reading of its agent container (the
// console's memory chart is read off it by the metrics middleware).
func (s *memorySampler) sampled(ctx actor.Context, c *samplerState, at time.Time, usage, throttled uint64) {
	if c.Role != roleAgent || ctx.Parent() == nil {
		return
	}
	ctx.Send(ctx.Parent(), messages.MemorySampled{AttemptID: s.attemptID, LimitBytes: c.LimitBytes,
		Sample: messages.MemorySample{At: at.UTC(), UsageBytes: usage, CPUThrottledNanos: throttled}})
}

// next answers waiting report requests once the closing round is done,
// runs the final round when it was asked for meanwhile, or re-arms the
// timer.
func (s *memorySampler) next(ctx actor.Context) {
	switch {
	case s.finalWanted && !s.finalTaken:
		s.round(ctx, true)
		return
	case s.closing && len(s.waiting) > 0:
		report := s.report()
		for _, pid := range s.waiting {
			ctx.Send(pid, report)
		}
		s.waiting = nil
		return
	case s.pending && !s.closing:
		s.pending = false
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.round(ctx, false)
		return
	}
	if s.timer != nil || s.closing {
		return
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	s.timer = s.clk.AfterFunc(s.interval, func() { system.Root.Send(self, sampleTick{}) })
}

// watch starts the closer watch of a container's refused forks, when its
// counters have one: a goroutine of the sampler's, which ends with its run
// context (cancelled when the sampler stops) or with the cgroup.
func (s *memorySampler) watch(ctx actor.Context, id string, counters ContainerCounters) {
	w, ok := counters.(CounterWatcher)
	if !ok {
		return
	}
	system, self, runCtx := ctx.ActorSystem(), ctx.Self(), s.runCtx
	go func() {
		_ = w.WatchEvents(runCtx, func(n uint64) { system.Root.Send(self, countersChanged{id: id, pidsMaxEvents: n}) })
	}()
}

// release tells the worker the last reading is taken. The workspace is
// discarded first: the worker's output is on the control volume by now and
// the last reading has measured the workspace, so nothing will read it
// again, and its unwritten pages would otherwise be written back through
// the loop device when the engine unmounts it after the worker's exit,
// before the engine reports the container stopped (about 0.7 s at 100k
// files). A failed discard only costs that time.
func (s *memorySampler) release(ctx actor.Context) {
	agent := s.role(roleAgent)
	if agent == nil {
		return
	}
	docker, id, discard := s.docker, agent.ID, s.discard
	runAsync(ctx, s.runCtx, "release worker", func(runCtx context.Context) any {
		callCtx, cancel := context.WithTimeout(runCtx, releaseTimeout)
		defer cancel()
		var done releaseDone
		if discard != nil {
			done.discardErr = discard(callCtx)
		}
		done.err = docker.ReleaseWorker(callCtx, id)
		return done
	})
}

func (s *memorySampler) container(id string) *samplerState {
	for _, c := range s.containers {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (s *memorySampler) role(role string) *samplerState {
	for _, c := range s.containers {
		if c.Role == role {
			return c
		}
	}
	return nil
}

func (c *samplerState) observe(path string, u cgroups.FSUsage) {
	o, ok := c.storage[path]
	if !ok {
		o = messages.StorageObservation{Path: path, TotalBytes: u.Total, MinFreeBytes: u.Free, TmpfsInMemory: u.Tmpfs}
	}
	o.MinFreeBytes = min(o.MinFreeBytes, u.Free)
	o.MaxUsedBytes = max(o.MaxUsedBytes, u.Used)
	o.Full = o.Full || (u.Total > 0 && u.Free < storageFullBelow)
	c.storage[path] = o
}

// maxOpenFails is how many rounds in a row may fail to find a container's
// cgroup before the sampler settles on Engine API stats for it.
const maxOpenFails = 3

// storageFullBelow is the free space under which a file system is full
// (the worker uses the same threshold).
const storageFullBelow = 64 << 10

func (c *samplerState) source() string {
	switch {
	case c.kernel && c.peakKnown:
		return messages.TelemetryKernelPeak
	case c.kernel:
		return messages.TelemetryCgroupSampled
	default:
		return messages.TelemetryEngineStats
	}
}

// report builds the sampler's account; a record that fails validation is
// dropped rather than carried.
func (s *memorySampler) report() SamplerReport {
	rep := SamplerReport{Worker: s.worker}
	if agent := s.role(roleAgent); agent != nil && agent.kernel {
		rep.Kernel = dockerops.KernelFacts{
			OOMKills: agent.last.OOMKills, OOMKnown: agent.last.OOMKnown,
			PidsMaxEvents: agent.last.PidsMaxEvents, PidsKnown: agent.last.PidsKnown,
		}
		for _, path := range watchedPaths {
			if o, ok := agent.storage[path]; ok {
				rep.Kernel.Storage = append(rep.Kernel.Storage, o)
			}
		}
		rep.Kernel.StorageKnown = len(rep.Kernel.Storage) > 0
		rep.Kernel.StorageFinal = rep.Kernel.StorageKnown && agent.final
	}
	if s.rounds == 0 {
		return rep
	}
	t := &messages.SandboxTelemetry{
		SchemaVersion:     messages.TelemetrySchema,
		SampleIntervalMs:  max(1, int(s.interval/time.Millisecond)),
		SampleCount:       s.rounds,
		FailedSampleCount: s.failedRounds,
		FinalReading:      s.finalTaken,
		FirstSampledAt:    s.first.UTC(),
		LastSampledAt:     s.last.UTC(),
	}
	var sources []string
	for _, c := range s.containers {
		if c.samples == 0 {
			continue
		}
		ct := messages.ContainerTelemetry{ContainerID: c.ID, Name: c.Name, Role: c.Role, Source: c.source(), PeakMemoryBytes: c.peak, Samples: c.samples}
		if c.kernel {
			ct.OOMKills, ct.PidsMaxEvents = c.last.OOMKills, c.last.PidsMaxEvents
			if c.last.CPUKnown {
				ct.CPUUsageNanos, ct.CPUThrottledNanos = c.last.CPUUsageNanos, c.last.CPUThrottledNanos
			}
		}
		t.Containers = append(t.Containers, ct)
		t.PeakMemoryBytes += ct.PeakMemoryBytes
		t.CPUUsageNanos += ct.CPUUsageNanos
		t.CPUThrottledNanos += ct.CPUThrottledNanos
		if !slices.Contains(sources, ct.Source) {
			sources = append(sources, ct.Source)
		}
	}
	slices.SortFunc(t.Containers, func(a, b messages.ContainerTelemetry) int {
		if a.Role != b.Role {
			return strings.Compare(a.Role, b.Role)
		}
		return strings.Compare(a.Name, b.Name)
	})
	t.Source = messages.TelemetryMixed
	if len(sources) == 1 {
		t.Source = sources[0]
	}
	if t.Validate() == nil {
		rep.Telemetry = t
	}
	return rep
}
