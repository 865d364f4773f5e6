package imagepolicy

import (
	"fmt"
	"strings"

	"github.com/forgedev/forged/internal/kit/strictjson"
)

// Severity is a finding's severity, lowest first.
type Severity int

// The severities, as scanners name them (grype's and osv-scanner's
// vocabulary): unknown and negligible rank below low.
const (
	SeverityUnknown Severity = iota
	SeverityNegligible
	SeverityLow
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = []string{"unknown", "negligible", "low", "medium", "high", "critical"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return "unknown"
	}
	return severityNames[s]
}

// ParseSeverity reads a severity name, case-insensitively.
func ParseSeverity(name string) (Severity, error) {
	for i, n := range severityNames {
		if strings.EqualFold(name, n) {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("severity %q is none of %s", clip(name, 40), strings.Join(severityNames, ", "))
}

// Limits of a scan command's answer.
const (
	// MaxFindingsBytes bounds the findings document (the scan command's
	// stdout); a longer answer is refused.
	MaxFindingsBytes = 8 << 20
	// MaxFindings bounds the findings it lists.
	MaxFindings = 100_000
	maxIDLength = 256
	maxNameLen  = 512
)

// Finding is one vulnerability the scanner reports.
type Finding struct {
	// ID is the advisory's identifier (CVE-…, GHSA-…, OSV ids); the
	// allowlist matches it exactly.
	ID string `json:"id"`
	// Package and Version name what is affected (free text, for the
	// operator's eyes).
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	// Severity is one of critical, high, medium, low, negligible, unknown.
	Severity string `json:"severity"`
}

// Findings is the scan command's whole answer:
//
//	{"findings": [{"id": "CVE-2024-0001", "package": "openssl",
//	  "version": "3.0.1", "severity": "high"}]}
//
// Decoded strictly: one JSON object, no unknown or duplicate keys, nothing
// after it; "findings" is required (an empty list is a clean image).
type Findings struct {
	Findings []Finding `json:"findings"`
}

// ParseFindings decodes and checks a findings document. Severities are
// normalised to lower case.
func ParseFindings(data []byte) (Findings, error) {
	if len(data) > MaxFindingsBytes {
		return Findings{}, fmt.Errorf("findings: the document is larger than %d bytes", MaxFindingsBytes)
	}
	var doc struct {
		Findings *[]Finding `json:"findings"`
	}
	if err := strictjson.Decode(data, &doc); err != nil {
		return Findings{}, fmt.Errorf("findings: %w", err)
	}
	if doc.Findings == nil {
		return Findings{}, fmt.Errorf(`findings: the document has no "findings" list`)
	}
	list := *doc.Findings
	if len(list) > MaxFindings {
		return Findings{}, fmt.Errorf("findings: %d findings, more than %d", len(list), MaxFindings)
	}
	for i := range list {
		f := &list[i]
		if f.ID == "" || len(f.ID) > maxIDLength || strings.ContainsFunc(f.ID, isControlOrSpace) {
			return Findings{}, fmt.Errorf("findings[%d]: the id %q is empty, longer than %d bytes or holds spaces or control characters", i, clip(f.ID, 60), maxIDLength)
		}
		if len(f.Package) > maxNameLen || len(f.Version) > maxNameLen {
			return Findings{}, fmt.Errorf("findings[%d]: package or version longer than %d bytes", i, maxNameLen)
		}
		sev, err := ParseSeverity(f.Severity)
		if err != nil {
			return Findings{}, fmt.Errorf("findings[%d]: %w", i, err)
		}
		f.Severity = sev.String()
	}
	return Findings{Findings: list}, nil
}

func isControlOrSpace(r rune) bool { return r <= ' ' || r == 0x7f }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
