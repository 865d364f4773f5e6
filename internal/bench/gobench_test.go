package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBenchLine(t *testing.T) {
	out := "goos: linux\nBenchmarkLeaseWatchdogReactionX-2 1 5 ns/op\n" +
		"BenchmarkLeaseWatchdogReaction-2   \t     200\t   5204321 ns/op\t         0.6000 late-µs/op\t      4.800 worst-late-µs\nPASS\n"
	n, metrics, ok := parseBenchLine(out, "BenchmarkLeaseWatchdogReaction")
	require.True(t, ok)
	require.Equal(t, 200, n)
	require.Equal(t, map[string]float64{"ns/op": 5204321, "late-µs/op": 0.6, "worst-late-µs": 4.8}, metrics)

	// A log line printed by the benchmark's code splits the result.
	split := "BenchmarkAdmissionRate-2   \t\x1b[2m12:03AM\x1b[0m INF actor system started id=x\n" +
		"  200000\t      6194 ns/op\t    161438 admissions/s\nPASS\n"
	n, metrics, ok = parseBenchLine(split, "BenchmarkAdmissionRate")
	require.True(t, ok)
	require.Equal(t, 200000, n)
	require.Equal(t, 161438.0, metrics["admissions/s"])

	_, _, ok = parseBenchLine("PASS\nok  \tx\t0.1s\n", "BenchmarkLeaseWatchdogReaction")
	require.False(t, ok)
	_, _, ok = parseBenchLine("BenchmarkLeaseWatchdogReaction-2 --- FAIL\n", "BenchmarkLeaseWatchdogReaction")
	require.False(t, ok)
}

// Every Go benchmark the report runs names a package of the repository
// that declares it (a package moved under internal/ once left B3 and B4
// "not measured" in a full run).
func TestGoBenchmarksNameTheirPackages(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, b := range goBenchmarks {
		dir := filepath.Join(root, filepath.FromSlash(b.Package))
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "%s: no test files in %s", b.Name, b.Package)
		found := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			found = found || strings.Contains(string(src), "\nfunc "+b.Name+"(b *testing.B)")
		}
		require.True(t, found, "%s is not declared in %s", b.Name, b.Package)
	}
}
