package bench

import (
	"slices"
	"time"
)

// Summary is the median, minimum and maximum of N samples, in
// milliseconds (or the unit Unit names).
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Unit   string  `json:"unit"`
	// Samples are the raw figures, in the order taken.
	Samples []float64 `json:"samples"`
}

// Summarize returns the summary of samples in unit.
func Summarize(unit string, samples []float64) Summary {
	s := Summary{N: len(samples), Unit: unit, Samples: slices.Clone(samples)}
	if len(samples) == 0 {
		return s
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	mid := len(sorted) / 2
	if len(sorted)%2 == 1 {
		s.Median = sorted[mid]
	} else {
		s.Median = (sorted[mid-1] + sorted[mid]) / 2
	}
	return s
}

// Durations summarizes durations in milliseconds.
func Durations(ds []time.Duration) Summary {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	return Summarize("ms", ms)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
