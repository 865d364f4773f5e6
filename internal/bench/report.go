package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/forgedev/forged/internal/kit/text"
)

// Target is one of the targets and whether this run met it.
type Target struct {
	Section string `json:"section"`
	Goal    string `json:"goal"`
	Figure  string `json:"figure"`
	// Met is nil when the run has no figure for it.
	Met *bool `json:"met"`
}

// Targets evaluates the targets against the run's figures (medians).
func (r *Results) Targets() []Target {
	var out []Target
	add := func(section, goal, figure string, met *bool) {
		out = append(out, Target{Section: section, Goal: goal, Figure: figure, Met: met})
	}
	yes := func(b bool) *bool { return &b }
	if d, f, ok := pair(r.B1, "daemon", "floor"); ok {
		ratio := d / f
		figure := fmt.Sprintf("%.2f× (%.0f ms against %.0f ms)", ratio, d, f)
		if _, own, ok := pair(r.B1, "daemon", "floor, no network"); ok {
			figure += fmt.Sprintf("; %.2f× the floor of its own calls (no network, %.0f ms)", d/own, own)
		}
		add("B1", "daemon ≤ 1.0× the floor", figure, yes(ratio <= 1.0))
	} else {
		add("B1", "daemon ≤ 1.0× the floor", "not measured", nil)
	}
	if d, c, ok := pair(r.B2, "daemon", "seed CLI"); ok {
		ratio := c / d
		add("B2", "≥ 2.5× the CLI at equal capacity", fmt.Sprintf("%.2f× (%.1f s against %.1f s)", ratio, d/1000, c/1000), yes(ratio >= 2.5))
	} else {
		add("B2", "≥ 2.5× the CLI at equal capacity", "not measured", nil)
	}
	if gb := r.goBench("BenchmarkSpikeFidelity"); gb != nil && gb.Error == "" {
		met := true
		var parts []string
		for _, ms := range []int{10, 30, 300} {
			seen := gb.Metrics[fmt.Sprintf("kernel-%dms-seen-frac", ms)]
			errFrac := gb.Metrics[fmt.Sprintf("kernel-%dms-err-frac", ms)]
			met = met && seen >= 1 && errFrac <= 0.02
			parts = append(parts, fmt.Sprintf("%d ms: %.0f%% seen, error %.1f%%", ms, seen*100, errFrac*100))
		}
		add("B3", "100% of spikes ≥ 10 ms, peak error ≤ 2%", strings.Join(parts, "; "), yes(met))
	} else {
		add("B3", "100% of spikes ≥ 10 ms, peak error ≤ 2%", "not measured", nil)
	}
	if gb := r.goBench("BenchmarkLeaseExpiryToWorkerStopped"); gb != nil && gb.Error == "" && r.B4EngineStop != nil {
		stop := gb.Metrics["stop-ms/op"]
		budget := 50 + r.B4EngineStop.Median
		add("B4", "expiry to worker stopped ≤ 50 ms + the engine's stop", fmt.Sprintf("%.0f ms against %.0f ms (engine stop %.0f ms)", stop, budget, r.B4EngineStop.Median), yes(stop <= budget))
	} else {
		add("B4", "expiry to worker stopped ≤ 50 ms + the engine's stop", "not measured", nil)
	}
	if r.B5IdleRSS != nil {
		add("B5", "idle daemon ≤ 30 MiB", fmt.Sprintf("%.1f MiB", r.B5IdleRSS.Median), yes(r.B5IdleRSS.Median <= 30))
	} else {
		add("B5", "idle daemon ≤ 30 MiB", "not measured", nil)
	}
	if gb := r.goBench("BenchmarkAttemptTreeHeap"); gb != nil && gb.Error == "" {
		kib := gb.Metrics["B/tree"] / 1024
		add("B5", "≤ 256 KiB per live attempt tree", fmt.Sprintf("%.0f KiB", kib), yes(kib <= 256))
	} else {
		add("B5", "≤ 256 KiB per live attempt tree", "not measured", nil)
	}
	if gb := r.goBench("BenchmarkAdmissionRate"); gb != nil && gb.Error == "" {
		rate := gb.Metrics["admissions/s"]
		add("B5", "≥ 100k admissions/s", fmt.Sprintf("%.0f /s", rate), yes(rate >= 100_000))
	} else {
		add("B5", "≥ 100k admissions/s", "not measured", nil)
	}
	for _, s := range r.B7 {
		if s.Error != "" || s.Attempt.N == 0 || s.StepsFloor() == 0 {
			continue
		}
		steps, whole := s.StepsMedian()/s.StepsFloor(), s.Attempt.Median/s.AttemptFloor()
		goal := "at 100k files: workspace + result ≤ 1.5× their floor, attempt ≤ 2× its floor"
		figure := fmt.Sprintf("%s: steps %.2f× (%.2f s against %.2f s), attempt %.2f× (%.2f s against %.2f s)",
			s.Size, steps, s.StepsMedian()/1000, s.StepsFloor()/1000, whole, s.Attempt.Median/1000, s.AttemptFloor()/1000)
		var met *bool
		if s.Size.Files == 100_000 {
			met = yes(steps <= 1.5 && whole <= 2)
		} else {
			figure += " (the target is set at 100k files)"
		}
		add("B7", goal, figure, met)
	}
	if len(r.B7) == 0 {
		add("B7", "at 100k files: workspace + result ≤ 1.5× their floor, attempt ≤ 2× its floor", "not measured", nil)
	}
	const b8Goal = "a daemon upgrade keeps the image cache: every first attempt after one hits it"
	if u := r.B8; u != nil && u.Rounds > 0 {
		figure := fmt.Sprintf("%d of %d cache hits", u.DaemonUpgradeHits, u.Rounds)
		if up, warm, ok := pair(u.Attempts, b8DaemonUpgrade, b8Warm); ok {
			figure += fmt.Sprintf("; %.2f× a warm attempt (%.2f s against %.2f s)", up/warm, up/1000, warm/1000)
		}
		if w, warm, ok := pair(u.Attempts, b8WorkerUpgrade, b8Warm); ok {
			figure += fmt.Sprintf("; a worker upgrade, which rebuilds the image: %.2f× (%.2f s)", w/warm, w/1000)
		}
		add("B8", b8Goal, figure, yes(u.DaemonUpgradeHits == u.Rounds))
	} else {
		add("B8", b8Goal, "not measured", nil)
	}
	if f, c, ok := pair(r.B6, "reaper", "seed CLI"); ok {
		ratio := f / c
		add("B6", "reaper ≤ 0.25× the CLI loop", fmt.Sprintf("%.2f× (%.1f s against %.1f s)", ratio, f/1000, c/1000), yes(ratio <= 0.25))
	} else {
		add("B6", "reaper ≤ 0.25× the CLI loop", "not measured", nil)
	}
	return out
}

func pair(m map[string]Summary, a, b string) (float64, float64, bool) {
	x, okA := m[a]
	y, okB := m[b]
	if !okA || !okB || x.N == 0 || y.N == 0 || y.Median == 0 || x.Median == 0 {
		return 0, 0, false
	}
	return x.Median, y.Median, true
}

func (r *Results) goBench(name string) *GoBenchmark {
	for i := range r.GoBenchmarks {
		if r.GoBenchmarks[i].Name == name {
			return &r.GoBenchmarks[i]
		}
	}
	return nil
}

// WriteJSON writes the figures and the evaluated targets as JSON.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Results
		Targets []Target `json:"targets"`
	}{r, r.Targets()})
}

// WriteMarkdown writes BENCHMARKS.md: method, machine, tables, targets,
// and notes (the analysis of unmet targets, written by hand from
// profiles) verbatim at the end.
func (r *Results) WriteMarkdown(w io.Writer, notes string) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Generated by `bash scripts/bench.sh` (`cmd/forged-bench`, package `internal/bench`) on %s, in %s.\n",
		r.StartedAt.Format("2006-01-02 15:04 MST"), r.FinishedAt.Sub(r.StartedAt).Round(1e9))
	fmt.Fprintf(&b, "The figures are also in `BENCHMARKS.json`. Every ratio compares figures taken in the same run.\n\n")
	fmt.Fprintf(&b, "## Machine\n\n| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| CPU | %s, %d cores |\n| memory | %.1f GiB |\n| kernel | %s |\n", m.CPUModel, m.Cores, float64(m.MemTotalBytes)/(1<<30), m.Kernel)
	fmt.Fprintf(&b, "| Docker | %s (API %s), storage %s, cgroup v%s |\n| Go | %s |\n", m.DockerVersion, m.DockerAPI, m.StorageDriver, m.CgroupVersion, m.GoVersion)
	fmt.Fprintf(&b, "| load average (1 min) | %.2f at the start, %.2f at the end |\n\n", m.LoadAtStart, m.LoadAtEnd)
	c := r.Config
	fmt.Fprintf(&b, "## Method\n\n")
	fmt.Fprintf(&b, "- N = %d timed runs per B1 variant after one untimed warm-up each, the variants interleaved round by round; "+
		"B2 %d attempts at capacity %d, %d run(s); B6 %d orphaned resources, %d run(s). Tables give the median, minimum and maximum.\n", c.Runs, c.BurstAttempts, c.BurstCapacity, c.BurstRuns, c.ReapResources, c.ReapRuns)
	b.WriteString(methodText)
	fmt.Fprintf(&b, "\n## Targets\n\n| | target | this run | met |\n| --- | --- | --- | --- |\n")
	for _, t := range r.Targets() {
		met := "not measured"
		if t.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*t.Met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Section, t.Goal, t.Figure, met)
	}
	section := func(title string, rows map[string]Summary, order []string, base string) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n| variant | median | min | max | N | × %s |\n| --- | --- | --- | --- | --- | --- |\n", title, base)
		for _, name := range order {
			s, ok := rows[name]
			if !ok {
				continue
			}
			ratio := "–"
			if ref, ok := rows[base]; ok && ref.Median > 0 {
				ratio = fmt.Sprintf("%.2f", s.Median/ref.Median)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s |\n", name, fmtFigure(s.Median, s.Unit), fmtFigure(s.Min, s.Unit), fmtFigure(s.Max, s.Unit), s.N, ratio)
		}
	}
	section("B1: one trivial attempt", r.B1, []string{"forged run", "daemon", "seed CLI", "floor", "floor, no network"}, "floor")
	if len(r.B1DaemonTimeline) > 0 {
		fmt.Fprintf(&b, "\nThe daemon's attempt of median duration, event by event (time since the POST; the step is the time since the previous event):\n\n| event | at | step |\n| --- | --- | --- |\n")
		prev := 0.0
		for _, st := range r.B1DaemonTimeline {
			fmt.Fprintf(&b, "| %s | %.0f ms | %.0f ms |\n", st.Event, st.AtMillis, st.AtMillis-prev)
			prev = st.AtMillis
		}
	}
	section("B2: burst", r.B2, []string{"daemon", "seed CLI"}, "daemon")
	if len(r.B2DaemonSteps) > 0 {
		fmt.Fprintf(&b, "\nThe attempts of the last daemon burst, event by event (medians over the attempts; at: since the POST; step: since the attempt's previous event):\n\n| event | attempts | at | step | longest step |\n| --- | --- | --- | --- | --- |\n")
		for _, st := range r.B2DaemonSteps {
			fmt.Fprintf(&b, "| %s | %d | %.0f ms | %.0f ms | %.0f ms |\n", st.Event, st.Attempts, st.MedianAtMs, st.MedianStep, st.MaxStep)
		}
	}
	section("B6: reaper", r.B6, []string{"reaper", "seed CLI"}, "seed CLI")
	writeScale(&b, r.B7)
	if u := r.B8; u != nil {
		section("B8: the first attempt after an upgrade", u.Attempts, []string{b8Warm, b8DaemonUpgrade, b8WorkerUpgrade}, b8Warm)
		fmt.Fprintf(&b, "\nImage cache hits: %d of %d attempts after a daemon upgrade, %d of %d after a worker upgrade.\n",
			u.DaemonUpgradeHits, u.Rounds, u.WorkerUpgradeHits, u.Rounds)
	}
	other := map[string]Summary{}
	if r.B4EngineStop != nil {
		other["B4: the engine's stop alone"] = *r.B4EngineStop
	}
	if r.B5IdleRSS != nil {
		other["B5: idle daemon RSS"] = *r.B5IdleRSS
		other[fmt.Sprintf("B5: daemon RSS with %d queued attempts", c.QueuedAttempts)] = *r.B5QueuedRSS
	}
	if len(other) > 0 {
		fmt.Fprintf(&b, "\n## B4, B5: process figures\n\n| figure | median | min | max | N |\n| --- | --- | --- | --- | --- |\n")
		for _, name := range []string{"B4: the engine's stop alone", "B5: idle daemon RSS", fmt.Sprintf("B5: daemon RSS with %d queued attempts", c.QueuedAttempts)} {
			if s, ok := other[name]; ok {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %d |\n", name, fmtFigure(s.Median, s.Unit), fmtFigure(s.Min, s.Unit), fmtFigure(s.Max, s.Unit), s.N)
			}
		}
	}
	if len(r.GoBenchmarks) > 0 {
		fmt.Fprintf(&b, "\n## Go benchmarks (B3, B4, B5)\n\nEach benchmark's method is in its doc comment.\n\n| | benchmark | iterations | figures |\n| --- | --- | --- | --- |\n")
		for _, gb := range r.GoBenchmarks {
			figures := fmtMetrics(gb.Metrics)
			if gb.Error != "" {
				figures = "failed: " + strings.ReplaceAll(text.EllipsisTail(gb.Error, 300), "\n", " ")
			}
			fmt.Fprintf(&b, "| %s | `%s` (`%s`) | %d | %s |\n", gb.Section, gb.Name, strings.TrimSuffix(gb.Package, "/"), gb.Iterations, figures)
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "\n## Measurements that failed in this run\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(text.EllipsisTail(e, 600), "\n", " "))
		}
	}
	if strings.TrimSpace(notes) != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(notes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtFigure(v float64, unit string) string {
	switch {
	case unit == "ms" && v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case unit == "ms":
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

func fmtMetrics(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if k == "ns/op" {
			continue
		}
		v := m[k]
		if v == math.Trunc(v) {
			parts = append(parts, fmt.Sprintf("%.0f %s", v, k))
		} else {
			parts = append(parts, fmt.Sprintf("%.3g %s", v, k))
		}
	}
	return strings.Join(parts, ", ")
}

const methodText = `- **B1, one trivial attempt** (the sample task writes one file): ` + "`forged run`" + ` is timed from fork to exit
  (process start, engine connection, preflight, the whole attempt, teardown). The daemon is timed from the POST of
  the dispatch to the "finished" line of its event stream. The seed CLI and the floor do the Docker part only, on
  the same agent image with the same worker and start packet; their input bundle is prepared with forged's own
  git code before the clock starts, and they import nothing: that favours them. forged's figures include the host
  git work (input bundle, build-context archive, quarantine import, branch move) and the durable ledger writes.
- **Seed CLI** (` + "`internal/bench/seedcli.go`" + `): the seed's fork-per-step sequence: image inspect; network create
  and three volume creates, one after another; a root init container (` + "`docker run --rm`" + `) preparing the
  volumes; ` + "`docker create`" + `; ` + "`docker cp`" + ` of the bundle; ` + "`docker start --attach --interactive`" + ` with the
  start packet while ` + "`docker stats --no-stream`" + ` samples once a second; inspect; ` + "`docker cp`" + ` of the output;
  the seed's teardown (list by label, inspect and remove each resource, list the remainder).
- **Floor** (` + "`internal/bench/floor.go`" + `): the same Engine API work with nothing else, on one connection:
  the seed's internal network and the volumes created in parallel, container create (forged's worker
  configuration), bundle copy, attach + wait + start, inspect and output copy in parallel, container remove, then
  network and volumes removed in parallel. The target compares the daemon with this floor, the seed's set of
  resources. **Floor, no network** is the same without the network (the worker on network none, as forged runs it
  since it needs no network): the floor of forged's own calls.
- **B2, burst:** all attempts POSTed at once to a daemon with that many slots, timed to the last outcome, against
  as many goroutines each running seed CLI sequences one after another over the same number of attempts.
- **B3:** ` + "`BenchmarkSpikeFidelity`" + ` (runner), forged's cgroup high-water-mark sampler against the seed's once-a-second stats.
- **B4:** ` + "`BenchmarkLeaseWatchdogReaction`" + ` (actors: deadline to ` + "`LeaseExpired`" + `) and
  ` + "`BenchmarkLeaseExpiryToWorkerStopped`" + ` (runner, real engine: deadline to the worker container not running), against the
  engine's own stop of a running worker-shaped container (docker-init, unprivileged user, a sleeping task), timed
  from the stop call to its return.
- **B5:** the daemon's VmRSS idle (one second after start) and with the queue full behind one running attempt
  (sampled 200 ms apart); ` + "`BenchmarkAttemptTreeHeap`" + ` (actors) and ` + "`BenchmarkAdmissionRate`" + ` (supervisor).
- **B6:** orphaned resources of one runner (per orphaned attempt: a created container and two volumes, all with
  the complete ` + "`dev.forge.*`" + ` labels), removed by one round of forged's reaper (in-process, grace 1 ms), against the
  seed's label reaper as a sequential CLI loop (list each kind, then inspect and remove one by one).
- **B7, repository scale:** synthetic repositories (` + "`internal/bench/synthrepo.go`" + `: the example's repository grown
  by ` + "`git fast-import`" + ` to FILES small Go files, 100 to a directory, and COMMITS commits each changing one file, then
  repacked; cached between runs) run the example's one-file task through a daemon with one slot (after one untimed
  attempt that builds the repository's sandbox image), alternating with
  the native git floor of the same work on the host: ` + "`git bundle create`" + ` of main (the input), ` + "`git clone`" + ` of
  that bundle with checkout (` + "`--branch main`" + `), ` + "`git status`" + `, and a one-file commit. The bundle is made in the
  benchmark's work directory; the clone, status and commit run, when the benchmark runs as root, at the root of a
  fresh ext4 image without a journal on a loop device, made for each run by the code that makes the worker's
  workspace volume (` + "`quota.Store.Provision`" + `: the same mkfs.ext4 options, the same size) and mounted nodev,nosuid,
  then unmounted and removed (neither timed). Without root they run in the work directory, on the host's
  filesystem, which can favour either side (the B7 table's "floor on" column says which was used; the Go
  benchmarks of ` + "`internal/worker/scale_bench_test.go`" + ` compare both on the same filesystem). forged's workspace step is
  ` + "`worker_started`" + ` → ` + "`workspace_materialized`" + `, its result step ` + "`task_exited`" + ` → ` + "`output_written`" + ` (status, commit,
  result bundle); their floor is clone + status + commit, and the whole attempt's floor adds the bundle. The
  attempt's worker may use every core (its CPU request is the host's cores), as the floor's git does. The
  workspace volume is sized for the repository, inodes included (mkfs.ext4 makes one inode per 16 KiB: a 4 GiB
  image has about 262k).
- **B8, upgrades:** one state root, one slot; each round a daemon of the measured build runs a timed attempt and
  stops (warm: its image is cached), a daemon of another build of the same source (` + "`scripts/bench.sh`" + ` stamps
  another version into ` + "`bin/forged-upgraded`" + `; same worker) starts on the same state root and runs one timed
  attempt, and then a daemon of the measured build with a worker of another digest (the bench's worker with a
  round-unique trailer, a stand-in for a new worker release) runs one; the images that last attempt built are
  removed after it. Every timed attempt is the first of its daemon process, so the three differ only in what the
  image cache holds. Before the worker became a binary of its own, every daemon upgrade cost what the worker
  upgrade costs here.
- **The host may be shared.** Other work on the same cores and the same dockerd (other developers' test suites, on
  this project's machines) may run during a run; the load average above, at its start and its end, shows how much.
  Absolute figures move with it; the ratios, taken in the same run and interleaved where possible, move less.
`

// writeScale writes B7's tables: per size, forged's steps against the
// native floor, then the median attempt's timeline.
func writeScale(b *strings.Builder, results []ScaleResult) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## B7: repository scale\n\nMedians over the runs (N each); the floor is the host's git doing the same work.\n\n")
	fmt.Fprintf(b, "| repository | pack | workspace volume | N | workspace | result | steps | their floor (clone + status + commit) | × | attempt | its floor (+ bundle) | × | floor on |\n")
	fmt.Fprintf(b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range results {
		if s.Error != "" {
			fmt.Fprintf(b, "| %s | failed: %s | | | | | | | | | | | |\n", s.Size, strings.ReplaceAll(text.EllipsisTail(s.Error, 300), "\n", " "))
			continue
		}
		fmt.Fprintf(b, "| %s | %.1f MiB | %d GiB | %d | %s | %s | %s | %s (%s + %s + %s) | %.2f | %s | %s (%s) | %.2f | %s |\n",
			s.Size, float64(s.PackBytes)/(1<<20), s.WorkspaceBytes>>30, s.Attempt.N,
			fmtFigure(s.Workspace.Median, "ms"), fmtFigure(s.Result.Median, "ms"), fmtFigure(s.StepsMedian(), "ms"),
			fmtFigure(s.StepsFloor(), "ms"), fmtFigure(s.FloorClone.Median, "ms"), fmtFigure(s.FloorStatus.Median, "ms"), fmtFigure(s.FloorCommit.Median, "ms"),
			s.StepsMedian()/s.StepsFloor(),
			fmtFigure(s.Attempt.Median, "ms"), fmtFigure(s.AttemptFloor(), "ms"), fmtFigure(s.FloorBundle.Median, "ms"),
			s.Attempt.Median/s.AttemptFloor(), s.FloorFilesystem)
	}
	for _, s := range results {
		if len(s.Timeline) == 0 {
			continue
		}
		fmt.Fprintf(b, "\nThe attempt of median duration at %s, event by event (time since the POST; the step is the time since the previous event):\n\n| event | at | step |\n| --- | --- | --- |\n", s.Size)
		prev := 0.0
		for _, st := range s.Timeline {
			fmt.Fprintf(b, "| %s | %.0f ms | %.0f ms |\n", st.Event, st.AtMillis, st.AtMillis-prev)
			prev = st.AtMillis
		}
	}
}
