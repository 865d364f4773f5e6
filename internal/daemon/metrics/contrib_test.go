package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
)

// The operator's kit in contrib/: a Grafana dashboard and Prometheus alert
// rules on these metrics. The tests below hold them to the registry (every
// metric they name exists) and to Prometheus itself (promtool parses every
// query and runs the rules' unit tests).

const (
	dashboardFile  = "../../../contrib/grafana/forged-dashboard.json"
	alertsFile     = "../../../contrib/prometheus/forged-alerts.yml"
	alertTestsFile = "../../../contrib/prometheus/forged-alerts.test.yml"
)

// promtool is Debian's (package prometheus, installed by scripts/test.sh).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs promtool (Debian package prometheus; scripts/test.sh installs it)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return path
}

// dashboardQueries returns every query of the dashboard, by panel title,
// with Grafana's variables replaced by what Prometheus accepts.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	out := map[string][]string{}
	vars := strings.NewReplacer("$instance", ".*", "$__rate_interval", "5m")
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			require.NotEmpty(t, target.Expr, "panel %q", p.Title)
			out[p.Title] = append(out[p.Title], vars.Replace(target.Expr))
		}
	}
	return out
}

func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// exercised returns the names of every metric family the runner's
// metrics expose once each has a sample.
func exercised(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	m.WatchSnapshot(func() (messages.Snapshot, error) {
		return messages.Snapshot{Slots: 1, Preflight: &messages.HostReport{Available: true, Capacity: 1}}, nil
	})
	m.Submitted(messages.SubmitReply{Accepted: true})
	m.Finished(messages.AttemptOutcome{AttemptID: "a", Status: messages.StatusFailed, Code: "x", PeakMemoryBytes: 1})
	m.ReaperRound(reaper.Round{}, nil)
	m.ImageCollection("timer", imagegc.Report{}, nil)
	m.phases.WithLabelValues("running").Observe(1)
	m.permitWait.Observe(1)
	m.buildCache.WithLabelValues("hit").Inc()
	m.buildTime.WithLabelValues("hit").Observe(1)
	m.reaperItems.WithLabelValues("attempt").Inc()
	m.actorsLive.WithLabelValues("attempt").Set(1)
	m.mailbox.WithLabelValues("attempt").Set(1)
	m.messagesIn.WithLabelValues("attempt").Inc()
	m.messagesOut.WithLabelValues("attempt").Inc()
	m.restarts.WithLabelValues("attempt").Inc()
	m.deadLetters.WithLabelValues("attempt").Inc()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}

var metricName = regexp.MustCompile(`\bforged_[a-z_]+\b`)

// TestContribNamesOnlyMetricsThatExist fails when a dashboard panel or an
// alert names a metric forged does not export (a rename, a typo).
func TestContribNamesOnlyMetricsThatExist(t *testing.T) {
	names := exercised(t)
	check := func(where, expr string) {
		for _, n := range metricName.FindAllString(expr, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && names[b] {
					base = b
				}
			}
			assert.True(t, names[base], "%s names %s, which forged does not export", where, n)
		}
	}
	queries := dashboardQueries(t)
	require.GreaterOrEqual(t, len(queries), 12, "the dashboard's panels")
	for title, exprs := range queries {
		for _, e := range exprs {
			check("dashboard panel "+title, e)
		}
	}
	alerts := alertQueries(t)
	for _, want := range []string{"ForgedLeaksLeft", "ForgedAttemptsDegraded", "ForgedCapacityExhausted",
		"ForgedHostUnavailable", "ForgedFailureCodeSpike", "ForgedReaperStalled"} {
		assert.Contains(t, alerts, want)
	}
	for name, e := range alerts {
		check("alert "+name, e)
	}

	// What the dashboard covers, as the operator's kit promises.
	all := ""
	for _, exprs := range queries {
		all += strings.Join(exprs, "\n")
	}
	for _, family := range []string{"forged_slots_used", "forged_queue_length", "forged_attempts_finished_total",
		"forged_attempt_phase_duration_seconds_bucket", "forged_attempt_peak_memory_bytes_bucket", "forged_reaper_rounds_total",
		"forged_image_gc_runs_total", "forged_reaper_degraded_attempts", "sandbox_lease_expired"} {
		assert.Contains(t, all, family)
	}
}

// TestDashboardQueriesParse has promtool parse every dashboard query, as
// recording rules in a file of its own.
func TestDashboardQueriesParse(t *testing.T) {
	tool := promtool(t)
	queries := dashboardQueries(t)
	titles := make([]string, 0, len(queries))
	for title := range queries {
		titles = append(titles, title)
	}
	sort.Strings(titles)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, title := range titles {
		for j, e := range queries[title] {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d:query%d", i, j), Expr: e})
		}
	}
	raw, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	out, err := exec.Command(tool, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}

// TestAlertRules checks the rules with promtool and runs their unit tests,
// which fire each alert on synthetic series (and check that it stays
// quiet where it should).
func TestAlertRules(t *testing.T) {
	tool := promtool(t)
	out, err := exec.Command(tool, "check", "rules", alertsFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(tool, "test", "rules", alertTestsFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "SUCCESS")

	// A broken rule is caught: the unit tests are not vacuous.
	raw, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	dir := t.TempDir()
	broken := strings.Replace(string(raw), "expr: forged_host_available == 0", "expr: forged_host_available == 2", 1)
	require.NotEqual(t, string(raw), broken)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forged-alerts.yml"), []byte(broken), 0o600))
	tests, err := os.ReadFile(alertTestsFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forged-alerts.test.yml"), tests, 0o600))
	out, err = exec.Command(tool, "test", "rules", filepath.Join(dir, "forged-alerts.test.yml")).CombinedOutput()
	assert.Error(t, err, "the unit tests must fail on a broken rule: %s", out)
}
