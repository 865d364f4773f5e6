package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// scrape reads the metrics as Prometheus does: through the handler, in the
// text format, parsed.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	m.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	require.NoError(t, err)
	return families
}

func labelsOf(metric *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range metric.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestAFleetMemberExportsItsIdentity scrapes a runner's metrics before and
// after it joins a fleet: after, one info series names the fleet, the
// member's runner id and address, and the member count is read at each
// scrape; no other series is relabelled.
func TestAFleetMemberExportsItsIdentity(t *testing.T) {
	m := New()
	m.WatchSnapshot(func() (messages.Snapshot, error) { return messages.Snapshot{Slots: 2}, nil })
	m.AdmissionHeld(false)
	alone := scrape(t, m)
	assert.NotContains(t, alone, "forged_fleet_member_info", "a daemon running alone is no member")
	assert.NotContains(t, alone, "forged_fleet_members")

	var members atomic.Int64
	members.Store(3)
	id := FleetMember{Fleet: "trial", RunnerID: "0f6c7b8e-4a53-4d4c-9b8e-1f2a3b4c5d6e", Address: "127.0.0.1:7951"}
	require.NoError(t, m.JoinedFleet(id, func() int { return int(members.Load()) }))
	assert.Error(t, m.JoinedFleet(id, func() int { return 0 }), "a runner joins one fleet once")

	families := scrape(t, m)
	info := families["forged_fleet_member_info"]
	require.NotNil(t, info, "the member's identity is exported")
	assert.Equal(t, dto.MetricType_GAUGE, info.GetType())
	require.Len(t, info.GetMetric(), 1)
	assert.Equal(t, map[string]string{"fleet": "trial", "runner_id": id.RunnerID, "address": "127.0.0.1:7951"}, labelsOf(info.GetMetric()[0]))
	assert.Equal(t, 1.0, info.GetMetric()[0].GetGauge().GetValue())
	assert.Equal(t, 3.0, families["forged_fleet_members"].GetMetric()[0].GetGauge().GetValue())
	members.Store(2)
	assert.Equal(t, 2.0, scrape(t, m)["forged_fleet_members"].GetMetric()[0].GetGauge().GetValue(), "read at every scrape")

	// The other series keep their own labels: the identity joins them by
	// the scrape's instance (docs/fleet.md), it is not copied onto each.
	assert.Equal(t, 2.0, families["forged_slots_total"].GetMetric()[0].GetGauge().GetValue())
	for name, family := range families {
		if name == "forged_fleet_member_info" {
			continue
		}
		for _, metric := range family.GetMetric() {
			assert.NotContains(t, labelsOf(metric), "runner_id", name)
		}
	}
}
