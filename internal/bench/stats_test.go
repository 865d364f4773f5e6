package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarizeOddAndEven(t *testing.T) {
	s := Summarize("ms", []float64{5, 1, 3})
	require.Equal(t, Summary{N: 3, Median: 3, Min: 1, Max: 5, Unit: "ms", Samples: []float64{5, 1, 3}}, s)
	s = Summarize("ms", []float64{4, 1, 3, 2})
	require.Equal(t, 2.5, s.Median)
	require.Equal(t, 1.0, s.Min)
	require.Equal(t, 4.0, s.Max)
	require.Equal(t, 0, Summarize("ms", nil).N)
}

func TestDurationsInMilliseconds(t *testing.T) {
	s := Durations([]time.Duration{1500 * time.Microsecond, 3 * time.Millisecond})
	require.Equal(t, 2.25, s.Median)
	require.Equal(t, "ms", s.Unit)
}

func TestStepSummariesFoldTimelines(t *testing.T) {
	got := stepSummaries([][]TimelineStep{
		{{Event: "a", AtMillis: 10}, {Event: "b", AtMillis: 30}},
		{{Event: "a", AtMillis: 20}, {Event: "b", AtMillis: 60}},
		{{Event: "a", AtMillis: 30}},
	})
	require.Equal(t, []StepSummary{
		{Event: "a", Attempts: 3, MedianAtMs: 20, MedianStep: 20, MaxStep: 30},
		{Event: "b", Attempts: 2, MedianAtMs: 45, MedianStep: 30, MaxStep: 40},
	}, got)
}
