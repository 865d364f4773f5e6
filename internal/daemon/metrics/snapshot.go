package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/forgedev/forged/messages"
)

// SnapshotFunc reads the supervisor's counts at scrape time.
type SnapshotFunc func() (messages.Snapshot, error)

// WatchSnapshot registers the slot and queue gauges, read from snapshot at
// every scrape. A failed read reports nothing (and no stale value).
func (m *Metrics) WatchSnapshot(snapshot SnapshotFunc) {
	m.registry.MustRegister(&snapshotCollector{read: snapshot})
}

var (
	slotsTotalDesc = prometheus.NewDesc(Namespace+"_slots_total", "Capacity slots: attempts that may run at once.", nil, nil)
	slotsUsedDesc  = prometheus.NewDesc(Namespace+"_slots_used", "Slots held by running attempts.", nil, nil)
	queueDesc      = prometheus.NewDesc(Namespace+"_queue_length", "Admitted attempts waiting for a slot.", nil, nil)
	buildQueueDesc = prometheus.NewDesc(Namespace+"_build_permit_queue_length", "Builds waiting for the global build permit.", nil, nil)
	degradedDesc   = prometheus.NewDesc(Namespace+"_attempts_degraded_total", "Attempts whose teardown left resources behind, since the start.", nil, nil)
	degradedNow    = prometheus.NewDesc(Namespace+"_attempts_degraded", "Attempts whose teardown left resources behind that no reaper round has cleared yet.", nil, nil)
	availableDesc  = prometheus.NewDesc(Namespace+"_host_available", "1 when the last preflight found the host able to run attempts, else 0 (its code is the label).", []string{"code"}, nil)
	capacityDesc   = prometheus.NewDesc(Namespace+"_host_capacity", "Attempts the last preflight allows at once (0 when the host is unavailable).", nil, nil)
)

type snapshotCollector struct{ read SnapshotFunc }

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{slotsTotalDesc, slotsUsedDesc, queueDesc, buildQueueDesc, degradedDesc, degradedNow, availableDesc, capacityDesc} {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(slotsTotalDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(slotsTotalDesc, prometheus.GaugeValue, float64(snap.Slots))
	ch <- prometheus.MustNewConstMetric(slotsUsedDesc, prometheus.GaugeValue, float64(len(snap.Attempts)))
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(snap.Queued))
	ch <- prometheus.MustNewConstMetric(buildQueueDesc, prometheus.GaugeValue, float64(snap.BuildQueue))
	ch <- prometheus.MustNewConstMetric(degradedDesc, prometheus.CounterValue, float64(snap.DegradedTotal))
	ch <- prometheus.MustNewConstMetric(degradedNow, prometheus.GaugeValue, float64(snap.Degraded))
	if host := snap.Preflight; host != nil {
		available := 0.0
		if host.Available {
			available = 1
		}
		ch <- prometheus.MustNewConstMetric(availableDesc, prometheus.GaugeValue, available, string(host.Code))
		ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(host.Capacity))
	}
}
