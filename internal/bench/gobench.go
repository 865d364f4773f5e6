package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/forgedev/forged/internal/kit/text"
)

// goBenchmarkSpec names a Go benchmark of the repository that a section
// of the report takes its figures from; each one's method is in its doc
// comment.
type goBenchmarkSpec struct {
	Section, Name, Package string
	// BenchTime is the iteration count (-benchtime Nx) of a full run.
	BenchTime int
}

// goBenchmarks are run in this order.
var goBenchmarks = []goBenchmarkSpec{
	{"B3", "BenchmarkSpikeFidelity", "./internal/daemon/runner/", 10},
	{"B4", "BenchmarkLeaseWatchdogReaction", "./actors/", 200},
	{"B4", "BenchmarkLeaseExpiryToWorkerStopped", "./internal/daemon/runner/", 5},
	{"B5", "BenchmarkAttemptTreeHeap", "./actors/", 200},
	{"B5", "BenchmarkAdmissionRate", "./supervisor/", 200000},
}

// GoBenchmark is one Go benchmark's result: its metrics by unit.
type GoBenchmark struct {
	Section    string             `json:"section"`
	Name       string             `json:"name"`
	Package    string             `json:"package"`
	Iterations int                `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"`
	Command    string             `json:"command"`
	Error      string             `json:"error,omitempty"`
}

// runGoBenchmark runs one benchmark with `go test -bench` (no other test)
// and parses its result line. benchTime 0 means the spec's own count.
func runGoBenchmark(ctx context.Context, repoRoot string, spec goBenchmarkSpec, benchTime int) (GoBenchmark, error) {
	if benchTime <= 0 {
		benchTime = spec.BenchTime
	}
	args := []string{"test", "-run", "^$", "-bench", "^" + spec.Name + "$", "-benchtime", strconv.Itoa(benchTime) + "x", "-count", "1", "-timeout", "30m", spec.Package}
	out := GoBenchmark{Section: spec.Section, Name: spec.Name, Package: spec.Package, Command: "go " + strings.Join(args, " ")}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = os.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	iterations, metrics, found := parseBenchLine(stdout.String(), spec.Name)
	out.Iterations, out.Metrics = iterations, metrics
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w: %s", out.Command, err, text.EllipsisTail(stdout.String()+stderr.String(), 1500))
	case !found:
		err = fmt.Errorf("%s: no result line (is the benchmark in this tree?): %s", out.Command, text.EllipsisTail(stdout.String(), 500))
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// parseBenchLine finds the result of benchmark name in go test's output
// ("BenchmarkX-2  200  5123 ns/op  0.6 late-µs/op …") and returns its
// iteration count and metrics by unit. A log line the benchmark's code
// printed may split the result: the name ends one line, and the figures
// begin a later one with the iteration count.
func parseBenchLine(output, name string) (int, map[string]float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] == name || strings.HasPrefix(fields[0], name+"-") {
			seen = true
			fields = fields[1:]
		} else if !seen {
			continue
		}
		if n, metrics, ok := parseFigures(fields); ok {
			return n, metrics, true
		}
	}
	return 0, nil, false
}

// parseFigures parses "N value unit value unit …"; it needs at least one
// pair.
func parseFigures(fields []string) (int, map[string]float64, bool) {
	if len(fields) < 3 {
		return 0, nil, false
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, nil, false
	}
	metrics := make(map[string]float64)
	for i := 1; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			break
		}
		metrics[fields[i+1]] = v
	}
	if len(metrics) == 0 {
		return 0, nil, false
	}
	return n, metrics, true
}
