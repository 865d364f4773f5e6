package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/forgedev/forged/messages"
)

// Results are every figure of one run.
type Results struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Machine    Machine   `json:"machine"`
	Config     RunSizes  `json:"config"`
	// B1: "forged run", "daemon", "seed CLI", "floor", "floor, no network".
	B1 map[string]Summary `json:"b1"`
	// B1DaemonTimeline is the event timeline of the daemon's median run.
	B1DaemonTimeline []TimelineStep `json:"b1DaemonTimeline,omitempty"`
	// B2: "daemon", "seed CLI" (whole burst).
	B2 map[string]Summary `json:"b2"`
	// B2DaemonSteps summarize, event by event, the attempts of the last
	// daemon burst.
	B2DaemonSteps []StepSummary `json:"b2DaemonSteps,omitempty"`
	// B4EngineStop is the engine's stop of a running worker-like
	// container, alone.
	B4EngineStop *Summary `json:"b4EngineStop,omitempty"`
	// B5 RSS of an idle daemon and of one with QueuedAttempts waiting.
	B5IdleRSS   *Summary `json:"b5IdleRss,omitempty"`
	B5QueuedRSS *Summary `json:"b5QueuedRss,omitempty"`
	// B6: "reaper", "seed CLI".
	B6 map[string]Summary `json:"b6"`
	// B7: one result per repository size.
	B7 []ScaleResult `json:"b7,omitempty"`
	// B8: attempts after upgrades.
	B8 *UpgradeResult `json:"b8,omitempty"`
	// GoBenchmarks are the Go benchmarks run for B3, B4 and B5.
	GoBenchmarks []GoBenchmark `json:"goBenchmarks,omitempty"`
	// Errors are the measurements that failed; the rest stand.
	Errors []string `json:"errors,omitempty"`
}

// RunSizes are the sizes the run used.
type RunSizes struct {
	Runs           int        `json:"runs"`
	BurstAttempts  int        `json:"burstAttempts"`
	BurstCapacity  int        `json:"burstCapacity"`
	BurstRuns      int        `json:"burstRuns"`
	ReapResources  int        `json:"reapResources"`
	ReapRuns       int        `json:"reapRuns"`
	QueuedAttempts int        `json:"queuedAttempts"`
	GoBenchTime    int        `json:"goBenchTime"`
	ScaleSizes     []RepoSize `json:"scaleSizes,omitempty"`
	ScaleRuns      int        `json:"scaleRuns,omitempty"`
}

// Run measures everything Config asks for. A measurement that fails is
// recorded in Errors and the run goes on.
func (e *Env) Run(ctx context.Context) *Results {
	c := e.cfg
	res := &Results{StartedAt: time.Now().UTC(), Machine: DescribeMachine(ctx, e.engine), Config: RunSizes{
		Runs: c.Runs, BurstAttempts: c.BurstAttempts, BurstCapacity: c.BurstCapacity, BurstRuns: c.BurstRuns,
		ReapResources: c.ReapResources, ReapRuns: c.ReapRuns, QueuedAttempts: c.QueuedAttempts, GoBenchTime: c.GoBenchTime,
		ScaleSizes: c.ScaleSizes, ScaleRuns: c.ScaleRuns,
	}}
	fail := func(what string, err error) {
		if err != nil {
			c.Log.Error(what, "err", err)
			res.Errors = append(res.Errors, what+": "+err.Error())
		}
	}
	var err error
	c.Log.Info("B1: one trivial attempt", "runs", c.Runs)
	res.B1, res.B1DaemonTimeline, err = e.measureOne(ctx)
	fail("B1", err)
	if c.BurstAttempts > 0 {
		c.Log.Info("B2: burst", "attempts", c.BurstAttempts, "capacity", c.BurstCapacity, "runs", c.BurstRuns)
		res.B2, res.B2DaemonSteps, err = e.measureBurst(ctx)
		fail("B2", err)
	}
	if c.ReapResources > 0 {
		c.Log.Info("B6: reaper", "resources", c.ReapResources, "runs", c.ReapRuns)
		res.B6, err = e.measureReap(ctx)
		fail("B6", err)
	}
	if len(c.ScaleSizes) > 0 {
		res.B7, err = e.measureScale(ctx)
		fail("B7", err)
	}
	if c.UpgradedForged != "" {
		c.Log.Info("B8: upgrades", "rounds", c.Runs)
		b8, err := e.measureUpgrade(ctx)
		fail("B8", err)
		if err == nil {
			res.B8 = &b8
		}
	}
	c.Log.Info("B4: the engine's stop alone")
	stop, err := e.measureEngineStop(ctx)
	fail("B4 engine stop", err)
	if err == nil {
		res.B4EngineStop = &stop
	}
	c.Log.Info("B5: daemon RSS", "queued", c.QueuedAttempts)
	idle, queued, err := e.measureRSS(ctx)
	fail("B5 RSS", err)
	if err == nil {
		res.B5IdleRSS, res.B5QueuedRSS = &idle, &queued
	}
	if c.GoBench {
		for _, gb := range goBenchmarks {
			c.Log.Info("Go benchmark", "name", gb.Name, "package", gb.Package)
			out, err := runGoBenchmark(ctx, c.RepoRoot, gb, c.GoBenchTime)
			fail("Go benchmark "+gb.Name, err)
			res.GoBenchmarks = append(res.GoBenchmarks, out)
		}
	}
	res.Machine.LoadAtEnd = loadAverage()
	res.FinishedAt = time.Now().UTC()
	return res
}

// measureOne is B1: the four variants, interleaved round by round so that
// the host's changing load falls on all of them alike, each after one
// untimed warm-up.
func (e *Env) measureOne(ctx context.Context) (map[string]Summary, []TimelineStep, error) {
	d, err := e.startDaemon(ctx, e.stateRoot("b1-daemon"), 1, 4)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = d.stop() }()
	runRoot := e.stateRoot("b1-run")
	type timed struct {
		took  time.Duration
		steps []TimelineStep
	}
	var timelines []timed
	variants := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"forged run", func() (time.Duration, error) { t, _, err := e.forgedRun(ctx, runRoot); return t, err }},
		{"daemon", func() (time.Duration, error) {
			dispatch, err := e.newDispatch(d.stateRoot, nil, 0)
			if err != nil {
				return 0, err
			}
			t, steps, err := d.runAttempt(ctx, dispatch)
			timelines = append(timelines, timed{t, steps})
			return t, err
		}},
		{"seed CLI", func() (time.Duration, error) { return e.timedSandbox(ctx, seedCLIAttempt) }},
		{"floor", func() (time.Duration, error) {
			return e.timedSandbox(ctx, func(ctx context.Context, image string, a *sandboxAttempt) error {
				return floorAttempt(ctx, e.engine, image, a, true)
			})
		}},
		{"floor, no network", func() (time.Duration, error) {
			return e.timedSandbox(ctx, func(ctx context.Context, image string, a *sandboxAttempt) error {
				return floorAttempt(ctx, e.engine, image, a, false)
			})
		}},
	}
	samples := make(map[string][]time.Duration)
	for round := -1; round < e.cfg.Runs; round++ {
		for _, v := range variants {
			t, err := v.run()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", v.name, err)
			}
			if round >= 0 {
				samples[v.name] = append(samples[v.name], t)
			}
		}
	}
	out := make(map[string]Summary)
	for name, s := range samples {
		out[name] = Durations(s)
	}
	// The timeline of the timed daemon run of median duration.
	if len(timelines) > 0 {
		timelines = timelines[1:] // the warm-up
	}
	slices.SortFunc(timelines, func(a, b timed) int { return cmp.Compare(a.took, b.took) })
	var median []TimelineStep
	if len(timelines) > 0 {
		median = timelines[len(timelines)/2].steps
	}
	return out, median, nil
}

// timedSandbox prepares an attempt's input (untimed) and times one run of
// a baseline driver on it.
func (e *Env) timedSandbox(ctx context.Context, drive func(context.Context, string, *sandboxAttempt) error) (time.Duration, error) {
	a, err := e.prepareAttempt(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer a.cleanup()
	start := time.Now()
	err = drive(ctx, e.imageID, a)
	return time.Since(start), err
}

// measureBurst is B2: BurstAttempts submitted at once to a daemon with
// BurstCapacity slots, against BurstCapacity seed CLI sequences in
// parallel working through as many attempts. Timed from the first submit
// to the last outcome.
func (e *Env) measureBurst(ctx context.Context) (map[string]Summary, []StepSummary, error) {
	c := e.cfg
	d, err := e.startDaemon(ctx, e.stateRoot("b2-daemon"), c.BurstCapacity, c.BurstAttempts)
	if err != nil {
		return nil, nil, err
	}
	var steps []StepSummary
	defer func() { _ = d.stop() }()
	var daemonTimes, cliTimes []time.Duration
	for run := 0; run < c.BurstRuns; run++ {
		t, timelines, err := e.daemonBurst(ctx, d)
		if err != nil {
			return nil, nil, fmt.Errorf("daemon: %w", err)
		}
		daemonTimes = append(daemonTimes, t)
		steps = stepSummaries(timelines)
		t, err = e.cliBurst(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("seed CLI: %w", err)
		}
		cliTimes = append(cliTimes, t)
	}
	return map[string]Summary{"daemon": Durations(daemonTimes), "seed CLI": Durations(cliTimes)}, steps, nil
}

func (e *Env) daemonBurst(ctx context.Context, d *daemon) (time.Duration, [][]TimelineStep, error) {
	n := e.cfg.BurstAttempts
	dispatches := make([]*messages.Dispatch, n)
	for i := range dispatches {
		dispatch, err := e.newDispatch(d.stateRoot, nil, 0)
		if err != nil {
			return 0, nil, err
		}
		dispatches[i] = dispatch
	}
	start := time.Now()
	errs := make([]error, n)
	timelines := make([][]TimelineStep, n)
	var wg sync.WaitGroup
	for i, dispatch := range dispatches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, timelines[i], errs[i] = d.runAttempt(ctx, dispatch)
		}()
	}
	wg.Wait()
	return time.Since(start), timelines, errors.Join(errs...)
}

func (e *Env) cliBurst(ctx context.Context) (time.Duration, error) {
	n := e.cfg.BurstAttempts
	attempts := make(chan *sandboxAttempt, n)
	for range n {
		a, err := e.prepareAttempt(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer a.cleanup()
		attempts <- a
	}
	close(attempts)
	start := time.Now()
	errs := make([]error, e.cfg.BurstCapacity)
	var wg sync.WaitGroup
	for i := range e.cfg.BurstCapacity {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range attempts {
				errs[i] = errors.Join(errs[i], seedCLIAttempt(ctx, e.imageID, a))
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// StepSummary is one event type across the attempts of a burst: the
// median time since the POST at which it came, and the median time since
// the attempt's previous event.
type StepSummary struct {
	Event      string  `json:"event"`
	Attempts   int     `json:"attempts"`
	MedianAtMs float64 `json:"medianAtMs"`
	MedianStep float64 `json:"medianStepMs"`
	MaxStep    float64 `json:"maxStepMs"`
}

// stepSummaries folds the timelines of many attempts, event type by event
// type, in the order of the first timeline.
func stepSummaries(timelines [][]TimelineStep) []StepSummary {
	var order []string
	at := map[string][]float64{}
	step := map[string][]float64{}
	for _, tl := range timelines {
		prev := 0.0
		for _, st := range tl {
			if _, ok := at[st.Event]; !ok {
				order = append(order, st.Event)
			}
			at[st.Event] = append(at[st.Event], st.AtMillis)
			step[st.Event] = append(step[st.Event], st.AtMillis-prev)
			prev = st.AtMillis
		}
	}
	out := make([]StepSummary, 0, len(order))
	for _, ev := range order {
		a, s := Summarize("ms", at[ev]), Summarize("ms", step[ev])
		out = append(out, StepSummary{Event: ev, Attempts: a.N, MedianAtMs: a.Median, MedianStep: s.Median, MaxStep: s.Max})
	}
	slices.SortStableFunc(out, func(x, y StepSummary) int { return cmp.Compare(x.MedianAtMs, y.MedianAtMs) })
	return out
}
