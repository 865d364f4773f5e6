package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEvaluateDiskPressure(t *testing.T) {
	const total = 1000 * gib
	policy := DiskPolicy{} // 10 GiB minimum, high 0.90, low 0.80
	cases := []struct {
		name      string
		latched   bool
		total     int64
		free      int64
		policy    DiskPolicy
		wantLow   bool
		wantRatio float64
	}{
		{"plenty", false, total, 500 * gib, policy, false, 0.5},
		{"just below high", false, total, 101 * gib, policy, false, 0.899},
		{"at high watermark", false, total, 100 * gib, policy, true, 0.9},
		{"above high", false, total, 50 * gib, policy, true, 0.95},
		{"latched between watermarks stays low", true, total, 150 * gib, policy, true, 0.85},
		{"latched just above low stays low", true, total, 199 * gib, policy, true, 0.801},
		{"latched at low watermark recovers", true, total, 200 * gib, policy, false, 0.8},
		{"latched below low recovers", true, total, 400 * gib, policy, false, 0.6},
		{"unlatched between watermarks is fine", false, total, 150 * gib, policy, false, 0.85},
		{"below minimum workspace on a small disk", false, 20 * gib, 9 * gib, policy, true, 0.55},
		{"exactly minimum workspace", false, 20 * gib, 10 * gib, policy, false, 0.5},
		{"latched, below minimum", true, 20 * gib, 9 * gib, policy, true, 0.55},
		{"unknown size", false, 0, 0, policy, true, 1},
		{"negative free is none", false, total, -1, policy, true, 1},
		{"custom watermarks", false, 100 * gib, 30 * gib, DiskPolicy{MinimumWorkspaceBytes: gib, HighWatermark: 0.7, LowWatermark: 0.5}, true, 0.7},
		{"custom low recovers", true, 100 * gib, 50 * gib, DiskPolicy{MinimumWorkspaceBytes: gib, HighWatermark: 0.7, LowWatermark: 0.5}, false, 0.5},
		{"low watermark clamped under high", true, 100 * gib, 31*gib + gib/2, DiskPolicy{MinimumWorkspaceBytes: gib, HighWatermark: 0.7, LowWatermark: 0.9}, false, 0.685},
		{"low watermark clamped, just above it", true, 100 * gib, 30*gib + gib/2, DiskPolicy{MinimumWorkspaceBytes: gib, HighWatermark: 0.7, LowWatermark: 0.9}, true, 0.695},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EvaluateDiskPressure(DiskState{Path: "/d", Low: tc.latched}, tc.total, tc.free, tc.policy)
			assert.Equal(t, tc.wantLow, got.Low)
			assert.InDelta(t, tc.wantRatio, got.UsedRatio, 1e-9)
			assert.Equal(t, "/d", got.Path)
		})
	}
}

func TestEvaluateDiskPressureSequence(t *testing.T) {
	// Used ratio over time on a 1000 GiB disk, and the expected verdicts.
	steps := []struct {
		usedGiB int64
		low     bool
	}{
		{700, false}, {899, false}, {900, true}, {850, true}, {801, true}, {800, false}, {850, false}, {950, true}, {500, false},
	}
	var s DiskState
	for i, st := range steps {
		s = EvaluateDiskPressure(s, 1000*gib, (1000-st.usedGiB)*gib, DiskPolicy{})
		assert.Equal(t, st.low, s.Low, "step %d (%d GiB used)", i, st.usedGiB)
	}
}

func TestDiskPolicyDefaults(t *testing.T) {
	p := DiskPolicy{}.withDefaults()
	assert.Equal(t, 10*gib, p.MinimumWorkspaceBytes)
	assert.Equal(t, 0.9, p.HighWatermark)
	assert.Equal(t, 0.8, p.LowWatermark)
	p = DiskPolicy{HighWatermark: 1.5}.withDefaults()
	assert.Equal(t, 0.99, p.HighWatermark)
	assert.Equal(t, 0.89, p.LowWatermark)
}
