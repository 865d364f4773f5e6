package imagepolicy

import (
	"fmt"
	"slices"
	"strings"
)

// Verdict is the gate's answer for one image.
type Verdict string

// The verdicts.
const (
	VerdictPass Verdict = "pass"
	VerdictWarn Verdict = "warn"
	VerdictFail Verdict = "fail"
)

// Thresholds is the operator's policy over findings: a finding whose ID is
// allowlisted counts for nothing; otherwise one at or above Fail fails the
// image, one at or above Warn warns. Fail above Warn is refused, so that a
// failing finding always warns too.
type Thresholds struct {
	Fail      Severity
	Warn      Severity
	Allowlist []string
}

// DefaultThresholds fail on high and critical findings and warn from low.
func DefaultThresholds() Thresholds {
	return Thresholds{Fail: SeverityHigh, Warn: SeverityLow}
}

// NewThresholds reads the operator's settings: the two severity names and
// the allowlisted IDs.
func NewThresholds(fail, warn string, allow []string) (Thresholds, error) {
	f, err := ParseSeverity(fail)
	if err != nil {
		return Thresholds{}, fmt.Errorf("--image-scan-fail-severity: %w", err)
	}
	w, err := ParseSeverity(warn)
	if err != nil {
		return Thresholds{}, fmt.Errorf("--image-scan-warn-severity: %w", err)
	}
	if w > f {
		return Thresholds{}, fmt.Errorf("--image-scan-warn-severity %s is above --image-scan-fail-severity %s; a failing finding must warn too", w, f)
	}
	var ids []string
	for _, id := range allow {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if len(id) > maxIDLength || strings.ContainsFunc(id, isControlOrSpace) {
			return Thresholds{}, fmt.Errorf("--image-scan-allow: the id %q is longer than %d bytes or holds spaces or control characters", clip(id, 60), maxIDLength)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return Thresholds{Fail: f, Warn: w, Allowlist: slices.Compact(ids)}, nil
}

// Evaluation is the gate's verdict and what it rests on.
type Evaluation struct {
	Verdict Verdict `json:"verdict"`
	// Counts counts the findings that were not allowlisted, by severity.
	Counts map[string]int `json:"counts"`
	// Allowed counts the allowlisted findings.
	Allowed int `json:"allowed"`
	// Blocking are the findings at or above the fail severity (at most
	// 20, for the failure message).
	Blocking []Finding `json:"blocking,omitempty"`
}

const maxBlockingListed = 20

// Evaluate applies t to the findings.
func (t Thresholds) Evaluate(f Findings) Evaluation {
	ev := Evaluation{Verdict: VerdictPass, Counts: map[string]int{}}
	for _, finding := range f.Findings {
		if _, allowed := slices.BinarySearch(t.Allowlist, finding.ID); allowed {
			ev.Allowed++
			continue
		}
		sev, err := ParseSeverity(finding.Severity)
		if err != nil {
			sev = SeverityUnknown
		}
		ev.Counts[sev.String()]++
		switch {
		case sev >= t.Fail:
			ev.Verdict = VerdictFail
			if len(ev.Blocking) < maxBlockingListed {
				ev.Blocking = append(ev.Blocking, finding)
			}
		case sev >= t.Warn && ev.Verdict == VerdictPass:
			ev.Verdict = VerdictWarn
		}
	}
	return ev
}

// Summary is one line naming the blocking findings, for a failure message.
func (ev Evaluation) Summary() string {
	parts := make([]string, 0, len(ev.Blocking))
	for _, f := range ev.Blocking {
		p := f.ID + " (" + f.Severity
		if f.Package != "" {
			p += ", " + clip(f.Package, 60)
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}
