package actors

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/messages"
)

// fakeKernel serves one container's counters; the peak and the OOM count
// are set by the test, and the cgroup "disappears" when gone is set.
type fakeKernel struct {
	mu      sync.Mutex
	openErr error
	// failOpens fails that many opens first (a container between cgroups).
	failOpens int
	opens     int
	reading   cgroups.Reading
	gone      bool
	reads     int
	tmp       cgroups.FSUsage
}

func (k *fakeKernel) Open(pid int, id string) (ContainerCounters, error) {
	if pid != 4242 || id != fakeContainerID {
		return nil, errors.New("wrong container")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.opens++; k.opens <= k.failOpens {
		return nil, errors.New("cgroup does not name the container yet")
	}
	return k, k.openErr
}

func (k *fakeKernel) openCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opens
}

func (k *fakeKernel) Read() (cgroups.Reading, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	if k.gone {
		return cgroups.Reading{}, fs.ErrNotExist
	}
	return k.reading, nil
}

func (k *fakeKernel) StatFS(path string) (cgroups.FSUsage, error) {
	if path == "/tmp" {
		return k.tmp, nil
	}
	return cgroups.FSUsage{}, fs.ErrNotExist
}

func (k *fakeKernel) set(f func(k *fakeKernel)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f(k)
}

// samplerDocker reports a running container with init pid 4242, and
// records releases.
type samplerDocker struct {
	mu       sync.Mutex
	released int
	stats    uint64
}

func (d *samplerDocker) MemoryUsage(context.Context, string) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats, nil
}

func (d *samplerDocker) InspectState(context.Context, string) (dockerops.ContainerState, error) {
	return dockerops.ContainerState{Running: true, Pid: 4242}, nil
}

func (d *samplerDocker) ReleaseWorker(context.Context, string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released++
	return nil
}

func (d *samplerDocker) releases() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.released
}

func spawnSampler(t *testing.T, docker SamplerDocker, kernel KernelCounters, clk clock.Clock) (*actor.ActorSystem, *actor.PID) {
	var opts []actortest.Option
	if manual, ok := clk.(*clock.Manual); ok {
		opts = append(opts, actortest.WithClock(manual))
	}
	sys := actortest.NewSystem(t, opts...)
	system := sys.ActorSystem
	pid := sys.Spawn(newMemorySamplerProps("attempt-x", docker, kernel, clk, 250*time.Millisecond,
		[]SampledContainer{{ID: fakeContainerID, Name: "forge-agent-x", Role: roleAgent}}, nil))
	return system, pid
}

func report(t *testing.T, system *actor.ActorSystem, pid *actor.PID) SamplerReport {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, PeakMemoryRequest{}, within).Result()
	require.NoError(t, err)
	return res.(SamplerReport)
}

func workerEvent(eventType string, data any) WorkerOutput {
	return WorkerOutput{Event: messages.RunnerEvent(eventType, "x", data)}
}

func TestSamplerKeepsTheKernelPeakAndTakesTheLastReadingBeforeRelease(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &fakeKernel{reading: cgroups.Reading{MemoryPeakBytes: 20 << 20, PeakKnown: true, OOMKnown: true, PidsKnown: true, CPUKnown: true, CPUUsageNanos: 5e6},
		tmp: cgroups.FSUsage{Total: 1 << 30, Free: 1 << 29, Used: 1 << 29, Tmpfs: true}}
	docker := &samplerDocker{stats: 1 << 20}
	system, pid := spawnSampler(t, docker, kernel, clk)

	// Between two readings the task spikes and falls back: the kernel's
	// high-water mark still has it, and the worker's output is announced
	// while the cgroup exists.
	kernel.set(func(k *fakeKernel) { k.reading.MemoryPeakBytes = 230 << 20; k.reading.PidsMaxEvents = 3 })
	system.Root.Send(pid, workerEvent(messages.TaskResourcesEvent, messages.TaskResources{TaskFailed: true, TaskExitCode: 1, MaxProcesses: 64}))
	system.Root.Send(pid, workerEvent(outputWrittenEvent, nil))
	require.Eventually(t, func() bool { return docker.releases() == 1 }, within, time.Millisecond, "released after the last reading")
	kernel.set(func(k *fakeKernel) { k.gone = true }) // the container exits

	rep := report(t, system, pid)
	require.NotNil(t, rep.Telemetry)
	tel := rep.Telemetry
	require.NoError(t, tel.Validate())
	assert.Equal(t, uint64(230<<20), tel.PeakMemoryBytes)
	assert.Equal(t, messages.TelemetryKernelPeak, tel.Source)
	assert.True(t, tel.FinalReading)
	assert.Equal(t, uint64(5e6), tel.CPUUsageNanos)
	require.Len(t, tel.Containers, 1)
	assert.Equal(t, roleAgent, tel.Containers[0].Role)
	assert.Equal(t, uint64(3), tel.Containers[0].PidsMaxEvents)
	assert.Equal(t, dockerops.KernelFacts{PidsMaxEvents: 3, PidsKnown: true, OOMKnown: true, StorageKnown: true, StorageFinal: true,
		Storage: []messages.StorageObservation{{Path: "/tmp", TotalBytes: 1 << 30, MinFreeBytes: 1 << 29, MaxUsedBytes: 1 << 29, TmpfsInMemory: true}}}, rep.Kernel)
	require.NotNil(t, rep.Worker)
	assert.Equal(t, 64, rep.Worker.MaxProcesses)
	assert.Equal(t, 1, docker.releases(), "one release")
}

func TestSamplerFallsBackToEngineStats(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &fakeKernel{openErr: errors.New("permission denied")}
	docker := &samplerDocker{stats: 30 << 20}
	system, pid := spawnSampler(t, docker, kernel, clk)
	rep := report(t, system, pid)
	require.NotNil(t, rep.Telemetry)
	assert.Equal(t, messages.TelemetryEngineStats, rep.Telemetry.Source)
	assert.Equal(t, uint64(30<<20), rep.Telemetry.PeakMemoryBytes)
	assert.False(t, rep.Kernel.OOMKnown || rep.Kernel.PidsKnown || rep.Kernel.StorageKnown, "no host facts without the kernel's counters")
	assert.False(t, rep.Telemetry.FinalReading)
}

// A cgroup that cannot be found in the first round (a container just
// started) is looked for again: the kernel's counters stay the source.
func TestSamplerRetriesAFailedOpen(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &fakeKernel{failOpens: maxOpenFails - 1, reading: cgroups.Reading{MemoryPeakBytes: 40 << 20, PeakKnown: true}}
	system, pid := spawnSampler(t, &samplerDocker{stats: 1 << 20}, kernel, clk)
	for round := 1; round <= maxOpenFails; round++ {
		require.Eventually(t, func() bool { return kernel.openCount() == round && clk.Pending() == 1 }, within, time.Millisecond, "round %d", round)
		clk.Advance(250 * time.Millisecond)
	}
	rep := report(t, system, pid)
	require.NotNil(t, rep.Telemetry)
	assert.Equal(t, messages.TelemetryKernelPeak, rep.Telemetry.Source)
	assert.Equal(t, uint64(40<<20), rep.Telemetry.PeakMemoryBytes)
}

func TestSamplerRecordsNothingRatherThanZero(t *testing.T) {
	// The container is gone before the first reading and the engine has
	// no usage for it: no record, never a peak of 0.
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &fakeKernel{gone: true}
	system, pid := spawnSampler(t, &samplerDocker{stats: 0}, kernel, clk)
	rep := report(t, system, pid)
	assert.Nil(t, rep.Telemetry)
}

func TestForwardToSamplerIgnoresTaskOutput(t *testing.T) {
	// A task printing a worker event arrives as task_output with role
	// "agent": only the worker's own lifecycle events reach the sampler.
	system := actortest.NewSystem(t)
	got := system.NewProbe()
	forwarder := system.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if ev, ok := c.Message().(messages.Event); ok {
			forwardToSampler(c, got.PID(), ev)
		}
	}))
	forged := messages.Event{Role: "agent", EventType: messages.TaskResourcesEvent}
	system.Root.Send(forwarder, forged)
	system.Root.Send(forwarder, messages.RunnerEvent("task_output", "x", nil))
	system.Root.Send(forwarder, messages.RunnerEvent(outputWrittenEvent, "x", nil))
	ev := actortest.Expect[WorkerOutput](t, got, within)
	assert.Equal(t, outputWrittenEvent, ev.Event.EventType)
	actortest.ExpectNoMessage[WorkerOutput](t, got, time.Second)
}

func FuzzDecodeTaskResources(f *testing.F) {
	f.Add(`{"taskFailed":true,"taskExitCode":1,"storage":[{"path":"/tmp","full":true}],"fdExhausted":true}`)
	f.Add(`{"storage":[{},{},{},{},{},{},{},{},{}]}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, data string) {
		if r := decodeTaskResources(data); r != nil && len(r.Storage) > maxReportedStorage {
			t.Fatalf("accepted %d storage rows", len(r.Storage))
		}
	})
}

// TestSamplerSendsItsReadingsToTheAttempt: each reading of the agent
// container goes to the sampler's parent (the attempt) as MemorySampled,
// with the attempt's id, the container's limit and the usage at that
// moment (for the console's memory chart).
func TestSamplerSendsItsReadingsToTheAttempt(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &fakeKernel{reading: cgroups.Reading{MemoryPeakBytes: 90 << 20, PeakKnown: true, MemoryUsageBytes: 40 << 20, CPUKnown: true, CPUThrottledNanos: 7}}
	sys := actortest.NewSystem(t, actortest.WithClock(clk))
	samples := make(chan messages.MemorySampled, 8)
	sys.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Spawn(newMemorySamplerProps("attempt-x", &samplerDocker{stats: 1 << 20}, kernel, clk, 250*time.Millisecond,
				[]SampledContainer{{ID: fakeContainerID, Name: "forge-agent-x", Role: roleAgent, LimitBytes: 128 << 20}}, nil))
		case messages.MemorySampled:
			samples <- msg
		}
	}))
	next := func() messages.MemorySampled {
		t.Helper()
		select {
		case msg := <-samples:
			return msg
		case <-time.After(within):
			t.Fatal("no MemorySampled reached the attempt")
			return messages.MemorySampled{}
		}
	}
	first := next()
	assert.Equal(t, messages.MemorySampled{AttemptID: "attempt-x", LimitBytes: 128 << 20,
		Sample: messages.MemorySample{At: clk.Now().UTC(), UsageBytes: 40 << 20, CPUThrottledNanos: 7}}, first)
	kernel.set(func(k *fakeKernel) { k.reading.MemoryUsageBytes = 50 << 20 })
	require.Eventually(t, func() bool { return clk.Pending() == 1 }, within, time.Millisecond)
	clk.Advance(250 * time.Millisecond)
	second := next()
	assert.Equal(t, uint64(50<<20), second.Sample.UsageBytes)
	assert.Equal(t, first.Sample.At.Add(250*time.Millisecond), second.Sample.At)
}

// The workspace is discarded once, after the last reading and before the
// release (the worker's exit unmounts it); a failed discard still releases.
func TestSamplerDiscardsTheWorkspaceBetweenTheLastReadingAndTheRelease(t *testing.T) {
	for _, discardErr := range []error{nil, errors.New("shutdown refused")} {
		clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		kernel := &fakeKernel{reading: cgroups.Reading{MemoryPeakBytes: 20 << 20, PeakKnown: true}}
		docker := &samplerDocker{stats: 1 << 20}
		var mu sync.Mutex
		var discards, releasedBefore, readsBefore int
		discard := func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			discards++
			releasedBefore = docker.releases()
			kernel.mu.Lock()
			readsBefore = kernel.reads
			kernel.mu.Unlock()
			return discardErr
		}
		sys := actortest.NewSystem(t, actortest.WithClock(clk))
		pid := sys.Spawn(newMemorySamplerProps("attempt-x", docker, kernel, clk, 250*time.Millisecond,
			[]SampledContainer{{ID: fakeContainerID, Name: "forge-agent-x", Role: roleAgent}}, discard))
		require.Eventually(t, func() bool { kernel.mu.Lock(); defer kernel.mu.Unlock(); return kernel.reads >= 1 }, within, time.Millisecond)
		kernel.mu.Lock()
		readsAtOutput := kernel.reads
		kernel.mu.Unlock()
		sys.ActorSystem.Root.Send(pid, workerEvent(outputWrittenEvent, nil))
		require.Eventually(t, func() bool { return docker.releases() == 1 }, within, time.Millisecond, "released (discard error: %v)", discardErr)
		mu.Lock()
		assert.Equal(t, 1, discards)
		assert.Zero(t, releasedBefore, "discarded before the release")
		assert.Greater(t, readsBefore, readsAtOutput, "discarded after the last reading")
		mu.Unlock()
	}
}

// watchingKernel is fakeKernel with the kernel's notifications: the test
// fires them, and sees the watch end with the sampler.
type watchingKernel struct {
	*fakeKernel
	fire    chan uint64
	started chan struct{}
	ended   chan struct{}
}

func (k *watchingKernel) Open(pid int, id string) (ContainerCounters, error) {
	if _, err := k.fakeKernel.Open(pid, id); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *watchingKernel) WatchEvents(ctx context.Context, changed func(uint64)) error {
	defer close(k.ended)
	close(k.started)
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-k.fire:
			changed(n)
		}
	}
}

func (k *watchingKernel) readCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

// A refused fork the watch sees is kept, and read at once, not at the
// next tick (the clock never moves here): a sandbox that then dies whole,
// its cgroup with it, keeps its pids.max count. The watch ends with the
// sampler.
func TestSamplerReadsAtOnceWhenTheKernelNotifiesAnEvent(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	kernel := &watchingKernel{fakeKernel: &fakeKernel{reading: cgroups.Reading{MemoryPeakBytes: 20 << 20, PeakKnown: true, PidsKnown: true}},
		fire: make(chan uint64), started: make(chan struct{}), ended: make(chan struct{})}
	system, pid := spawnSampler(t, &samplerDocker{}, kernel, clk)
	select {
	case <-kernel.started:
	case <-time.After(within):
		t.Fatal("the sampler did not watch the counters it opened")
	}
	require.Eventually(t, func() bool { return kernel.readCount() >= 1 }, within, time.Millisecond, "the first round")

	kernel.set(func(k *fakeKernel) { k.reading.PidsMaxEvents = 5 })
	kernel.fire <- 5
	require.Eventually(t, func() bool { return kernel.readCount() >= 2 }, within, time.Millisecond, "read on the notification, no tick")
	// The sandbox dies whole: its cgroup is gone before any reading sees
	// the next refusals, which only the watch saw.
	kernel.set(func(k *fakeKernel) { k.gone = true })
	kernel.fire <- 9
	require.Eventually(t, func() bool { return kernel.readCount() >= 3 }, within, time.Millisecond, "the notification's round finds the cgroup gone")

	rep := report(t, system, pid)
	require.NotNil(t, rep.Telemetry)
	assert.Equal(t, uint64(9), rep.Kernel.PidsMaxEvents)
	assert.True(t, rep.Kernel.PidsKnown)

	system.Root.Stop(pid)
	select {
	case <-kernel.ended:
	case <-time.After(within):
		t.Fatal("the watch outlived the sampler")
	}
}
