package imagepolicy

import (
	"strings"
	"testing"
)

func TestParseFindings(t *testing.T) {
	f, err := ParseFindings([]byte(`{"findings":[{"id":"CVE-2024-1","package":"openssl","version":"3.0.1","severity":"HIGH"},{"id":"GHSA-x","severity":"low"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Findings) != 2 || f.Findings[0].Severity != "high" || f.Findings[1].ID != "GHSA-x" {
		t.Fatalf("findings = %+v", f)
	}
	if f, err := ParseFindings([]byte(`{"findings":[]}`)); err != nil || len(f.Findings) != 0 {
		t.Fatalf("empty list: %+v, %v", f, err)
	}
	for name, doc := range map[string]string{
		"no list":          `{}`,
		"null list":        `{"findings":null}`,
		"unknown key":      `{"findings":[],"extra":1}`,
		"unknown field":    `{"findings":[{"id":"A","severity":"low","cvss":9}]}`,
		"duplicate key":    `{"findings":[],"findings":[]}`,
		"trailing data":    `{"findings":[]} {}`,
		"bad severity":     `{"findings":[{"id":"A","severity":"severe"}]}`,
		"missing severity": `{"findings":[{"id":"A"}]}`,
		"empty id":         `{"findings":[{"id":"","severity":"low"}]}`,
		"id with space":    `{"findings":[{"id":"CVE 1","severity":"low"}]}`,
		"id with newline":  `{"findings":[{"id":"CVE\n1","severity":"low"}]}`,
		"long id":          `{"findings":[{"id":"` + strings.Repeat("a", 300) + `","severity":"low"}]}`,
		"not json":         `CVE-1 high`,
		"array":            `[]`,
	} {
		if _, err := ParseFindings([]byte(doc)); err == nil {
			t.Errorf("%s: %s was accepted", name, doc)
		}
	}
	big := []byte(`{"findings":[` + strings.Repeat(" ", MaxFindingsBytes) + `]}`)
	if _, err := ParseFindings(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized document: %v", err)
	}
}

// FuzzParseFindings holds the parser to its contract on any input: it
// never panics, and what it accepts has bounded, clean ids and a known,
// lowercase severity, and parses again to the same result.
func FuzzParseFindings(f *testing.F) {
	f.Add([]byte(`{"findings":[{"id":"CVE-2024-1","package":"openssl","version":"3","severity":"High"}]}`))
	f.Add([]byte(`{"findings":[]}`))
	f.Add([]byte(`{"findings":[{"id":"A","severity":"unknown"},{"id":"A","severity":"critical"}]}`))
	f.Add([]byte(`{"Findings":[{"ID":"a","Severity":"low"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseFindings(data)
		if err != nil {
			return
		}
		for _, finding := range got.Findings {
			if finding.ID == "" || len(finding.ID) > maxIDLength || strings.ContainsFunc(finding.ID, isControlOrSpace) {
				t.Fatalf("accepted id %q", finding.ID)
			}
			if _, err := ParseSeverity(finding.Severity); err != nil || finding.Severity != strings.ToLower(finding.Severity) {
				t.Fatalf("accepted severity %q", finding.Severity)
			}
		}
		ev := DefaultThresholds().Evaluate(got)
		total := ev.Allowed
		for _, n := range ev.Counts {
			total += n
		}
		if total != len(got.Findings) {
			t.Fatalf("evaluation counted %d of %d findings", total, len(got.Findings))
		}
	})
}
