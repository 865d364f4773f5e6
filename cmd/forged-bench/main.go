// Command forged-bench measures forged side by side with the seed's
// docker-CLI sequence and the engine's floor, and writes BENCHMARKS.md and
// a JSON file of the figures. scripts/bench.sh builds and runs it; see
// package internal/bench for the method.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/forgedev/forged/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "forged-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg bench.Config
	var markdown, jsonOut, notes, render string
	var smoke bool
	var scale string
	flag.StringVar(&cfg.ForgedBinary, "forged", "bin/forged", "static forged binary (measured; the forged-worker beside it is the worker)")
	flag.StringVar(&cfg.WorkDir, "work-dir", "", "scratch directory (default: a new temporary one, removed at the end)")
	flag.StringVar(&cfg.Busybox, "busybox", "/bin/busybox", "static busybox for the base image (Debian's busybox-static)")
	flag.IntVar(&cfg.Runs, "runs", 5, "N: timed runs of each B1 variant (and B4/B5 samples)")
	flag.IntVar(&cfg.BurstAttempts, "burst-attempts", 30, "B2: attempts in a burst (0 skips B2)")
	flag.IntVar(&cfg.BurstCapacity, "burst-capacity", 3, "B2: slots, and parallel CLI sequences")
	flag.IntVar(&cfg.BurstRuns, "burst-runs", 2, "B2: bursts of each variant")
	flag.IntVar(&cfg.ReapResources, "reap-resources", 300, "B6: orphaned resources (0 skips B6)")
	flag.IntVar(&cfg.ReapRuns, "reap-runs", 2, "B6: rounds of each variant")
	flag.IntVar(&cfg.QueuedAttempts, "queued", 100, "B5: attempts queued for the RSS figure")
	flag.BoolVar(&cfg.GoBench, "go-bench", true, "run the Go benchmarks of B3, B4 and B5")
	flag.IntVar(&cfg.GoBenchTime, "go-benchtime", 0, "iterations of each Go benchmark (0: each one's own count)")
	flag.StringVar(&cfg.RepoRoot, "repo", ".", "repository root (for the Go benchmarks)")
	flag.StringVar(&cfg.Isolation, "isolation", "", "the measured forged processes' isolation floor (runc or gvisor; docs/gvisor.md)")
	flag.StringVar(&markdown, "markdown", "BENCHMARKS.md", "Markdown report to write")
	flag.StringVar(&jsonOut, "json", "BENCHMARKS.json", "JSON figures to write")
	flag.StringVar(&notes, "notes", "", "Markdown appended verbatim to the report (the analysis of unmet targets)")
	flag.StringVar(&render, "render", "", "measure nothing: write the Markdown report again from this JSON file of figures (with --notes)")
	flag.StringVar(&scale, "scale", "1kx1k,30kx1k,100kx1k,300kx1k,30kx10k,30kx50k",
		"B7: repository sizes, FILESxCOMMITS separated by commas (k: thousand; empty skips B7)")
	flag.IntVar(&cfg.ScaleRuns, "scale-runs", 3, "B7: attempts (and native floors) at each size")
	flag.StringVar(&cfg.ScaleCache, "scale-cache", "", "B7: directory that keeps the synthetic repositories between runs (default: the user's cache directory)")
	flag.StringVar(&cfg.UpgradedForged, "upgraded-forged", "", "B8: another build of forged (scripts/bench.sh builds bin/forged-upgraded with another version); empty skips B8")
	flag.BoolVar(&smoke, "smoke", false, "a short run that shows every measurement completes (N=1, 3-attempt burst, 9 orphans, 3 queued, no Go benchmarks)")
	flag.Parse()
	if smoke {
		cfg.Runs, cfg.BurstAttempts, cfg.BurstRuns, cfg.ReapResources, cfg.ReapRuns, cfg.QueuedAttempts, cfg.GoBench = 1, 3, 1, 9, 1, 3, false
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	if cfg.ScaleSizes, err = bench.ParseRepoSizes(scale); err != nil {
		return err
	}
	if smoke && scale == "1kx1k,30kx1k,100kx1k,300kx1k,30kx10k,30kx50k" {
		cfg.ScaleSizes, cfg.ScaleRuns = []bench.RepoSize{{Files: 1000, Commits: 100}}, 1
	}
	if cfg.ScaleCache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return err
		}
		cfg.ScaleCache = filepath.Join(base, "forged-bench")
	}
	if err := os.MkdirAll(cfg.ScaleCache, 0o755); err != nil {
		return err
	}
	if cfg.ForgedBinary, err = filepath.Abs(cfg.ForgedBinary); err != nil {
		return err
	}
	if cfg.UpgradedForged != "" {
		if cfg.UpgradedForged, err = filepath.Abs(cfg.UpgradedForged); err != nil {
			return err
		}
	}
	if cfg.WorkDir == "" {
		if cfg.WorkDir, err = os.MkdirTemp("", "forged-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(cfg.WorkDir)
	}
	var notesText []byte
	if notes != "" {
		if notesText, err = os.ReadFile(notes); err != nil {
			return err
		}
	}
	if render != "" {
		raw, err := os.ReadFile(render)
		if err != nil {
			return err
		}
		var res bench.Results
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("%s: %w", render, err)
		}
		return writeFile(markdown, func(f *os.File) error { return res.WriteMarkdown(f, string(notesText)) })
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := bench.Setup(ctx, cfg)
	if err != nil {
		return err
	}
	res := env.Run(ctx)
	if err := env.Close(); err != nil {
		res.Errors = append(res.Errors, "clean-up: "+err.Error())
	}
	if env.Leftovers > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("clean-up: %d labelled resources of the run's runners were left and swept at the end", env.Leftovers))
	}
	if err := writeFile(jsonOut, func(f *os.File) error { return res.WriteJSON(f) }); err != nil {
		return err
	}
	if err := writeFile(markdown, func(f *os.File) error { return res.WriteMarkdown(f, string(notesText)) }); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", markdown, jsonOut)
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d measurement(s) failed; see %s", len(res.Errors), markdown)
	}
	return nil
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
