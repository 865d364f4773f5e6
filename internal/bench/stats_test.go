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
