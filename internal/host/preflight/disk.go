package preflight

import (
	"math"

	"github.com/forgedev/forged/messages"
)

// DiskPolicy bounds the disk pressure on the Docker root directory. Zero
// fields take the defaults.
type DiskPolicy struct {
	// MinimumWorkspaceBytes is the free space below which the disk is low
	// whatever the ratio. Default 10 GiB.
	MinimumWorkspaceBytes int64 `json:"minimumWorkspaceBytes"`
	// HighWatermark is the used ratio (0..1) at or above which the disk
	// becomes low. Default 0.90; clamped to [0.01, 0.99].
	HighWatermark float64 `json:"highWatermark"`
	// LowWatermark is the used ratio at or below which a low disk recovers.
	// Default HighWatermark-0.10; clamped to [0, HighWatermark-0.01].
	LowWatermark float64 `json:"lowWatermark"`
}

// DiskState is messages.DiskState (the wire type lives there).
type DiskState = messages.DiskState

const gib = int64(1) << 30

// withDefaults fills and clamps the policy.
func (p DiskPolicy) withDefaults() DiskPolicy {
	if p.MinimumWorkspaceBytes <= 0 {
		p.MinimumWorkspaceBytes = 10 * gib
	}
	if p.HighWatermark <= 0 {
		p.HighWatermark = 0.90
	}
	p.HighWatermark = min(max(p.HighWatermark, 0.01), 0.99)
	if p.LowWatermark <= 0 {
		p.LowWatermark = p.HighWatermark - 0.10
	}
	p.LowWatermark = min(max(p.LowWatermark, 0), p.HighWatermark-0.01)
	p.HighWatermark, p.LowWatermark = roundRatio(p.HighWatermark), roundRatio(p.LowWatermark)
	return p
}

// EvaluateDiskPressure judges a filesystem of totalBytes with freeBytes
// available to unprivileged writers. The disk is low when less than the
// minimum workspace is free, when the size is unknown (total ≤ 0), or when
// the used ratio reaches the high watermark; once low it stays low (prev.Low)
// until the used ratio falls to the low watermark. The result keeps
// prev.Path.
func EvaluateDiskPressure(prev DiskState, totalBytes, freeBytes int64, policy DiskPolicy) DiskState {
	p := policy.withDefaults()
	s := DiskState{
		Path: prev.Path, TotalBytes: totalBytes, FreeBytes: max(freeBytes, 0),
		MinimumFreeBytes: p.MinimumWorkspaceBytes, HighWatermark: p.HighWatermark, LowWatermark: p.LowWatermark,
	}
	if totalBytes <= 0 {
		s.UsedRatio, s.Low = 1, true
		return s
	}
	s.UsedRatio = roundRatio(1 - float64(min(s.FreeBytes, totalBytes))/float64(totalBytes))
	switch {
	case s.FreeBytes < p.MinimumWorkspaceBytes, s.UsedRatio >= p.HighWatermark:
		s.Low = true
	default:
		s.Low = prev.Low && s.UsedRatio > p.LowWatermark
	}
	return s
}

// roundRatio rounds to nine decimals so that ratios and watermarks written
// as decimals (0.8) compare as their authors expect.
func roundRatio(r float64) float64 { return math.Round(r*1e9) / 1e9 }
