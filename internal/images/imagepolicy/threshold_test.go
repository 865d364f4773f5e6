package imagepolicy

import (
	"strings"
	"testing"
)

func findings(pairs ...string) Findings {
	var f Findings
	for i := 0; i+1 < len(pairs); i += 2 {
		f.Findings = append(f.Findings, Finding{ID: pairs[i], Package: "pkg-" + pairs[i], Severity: pairs[i+1]})
	}
	return f
}

func TestThresholdsEvaluate(t *testing.T) {
	def := DefaultThresholds()
	allowHigh, err := NewThresholds("high", "medium", []string{" CVE-H ", "", "CVE-H"})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := NewThresholds("unknown", "unknown", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		t        Thresholds
		findings Findings
		want     Verdict
		blocking int
		allowed  int
	}{
		{"clean", def, findings(), VerdictPass, 0, 0},
		{"negligible only", def, findings("N", "negligible", "U", "unknown"), VerdictPass, 0, 0},
		{"low warns", def, findings("L", "low"), VerdictWarn, 0, 0},
		{"medium warns", def, findings("M", "medium", "L", "low"), VerdictWarn, 0, 0},
		{"high fails", def, findings("L", "low", "H", "high"), VerdictFail, 1, 0},
		{"critical fails", def, findings("C", "critical", "H", "high"), VerdictFail, 2, 0},
		{"allowlisted high does not fail", allowHigh, findings("CVE-H", "high"), VerdictPass, 0, 1},
		{"allowlist is exact", allowHigh, findings("cve-h", "high"), VerdictFail, 1, 0},
		{"allowlisted high beside a medium warns", allowHigh, findings("CVE-H", "critical", "M", "medium"), VerdictWarn, 0, 1},
		{"low below a medium warn passes", allowHigh, findings("L", "low"), VerdictPass, 0, 0},
		{"strict fails on unknown", strict, findings("U", "unknown"), VerdictFail, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.t.Evaluate(tc.findings)
			if ev.Verdict != tc.want || len(ev.Blocking) != tc.blocking || ev.Allowed != tc.allowed {
				t.Fatalf("evaluation = %+v, want verdict %s, %d blocking, %d allowed", ev, tc.want, tc.blocking, tc.allowed)
			}
			if tc.blocking > 0 && !strings.Contains(ev.Summary(), ev.Blocking[0].ID) {
				t.Fatalf("summary %q does not name %s", ev.Summary(), ev.Blocking[0].ID)
			}
		})
	}
}

func TestThresholdsBoundTheBlockingList(t *testing.T) {
	var f Findings
	for i := 0; i < 50; i++ {
		f.Findings = append(f.Findings, Finding{ID: "C" + strings.Repeat("x", i), Severity: "critical"})
	}
	ev := DefaultThresholds().Evaluate(f)
	if ev.Verdict != VerdictFail || len(ev.Blocking) != maxBlockingListed || ev.Counts["critical"] != 50 {
		t.Fatalf("evaluation = %d blocking, counts %v", len(ev.Blocking), ev.Counts)
	}
}

func TestNewThresholdsRefuses(t *testing.T) {
	for _, tc := range []struct {
		fail, warn string
		allow      []string
		want       string
	}{
		{"severe", "low", nil, "--image-scan-fail-severity"},
		{"high", "bad", nil, "--image-scan-warn-severity"},
		{"medium", "high", nil, "above"},
		{"high", "low", []string{"CVE 1"}, "--image-scan-allow"},
	} {
		if _, err := NewThresholds(tc.fail, tc.warn, tc.allow); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewThresholds(%q, %q, %q) = %v, want an error naming %s", tc.fail, tc.warn, tc.allow, err, tc.want)
		}
	}
	th, err := NewThresholds("CRITICAL", "Medium", []string{"B", "A", "B"})
	if err != nil || th.Fail != SeverityCritical || th.Warn != SeverityMedium || strings.Join(th.Allowlist, ",") != "A,B" {
		t.Fatalf("NewThresholds = %+v, %v", th, err)
	}
}
