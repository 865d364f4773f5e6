package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// FleetMember is a runner's identity in a fleet (docs/fleet.md), as its
// metrics carry it.
type FleetMember struct {
	// Fleet is the fleet's name, RunnerID the member's persistent runner
	// id, Address its cluster address (host:port).
	Fleet, RunnerID, Address string
}

var (
	fleetInfoDesc = prometheus.NewDesc(Namespace+"_fleet_member_info",
		"1 while this daemon is a member of a fleet: the fleet's name, the member's runner id and its cluster address. Join it to any series by instance.",
		[]string{"fleet", "runner_id", "address"}, nil)
	fleetMembersDesc = prometheus.NewDesc(Namespace+"_fleet_members",
		"Members of the fleet this member's cluster lists (from etcd), itself included.", nil, nil)
)

// JoinedFleet exports the runner's fleet identity, once it joined: the
// info metric forged_fleet_member_info{fleet,runner_id,address} (always 1)
// and forged_fleet_members, read from members at every scrape. The
// identity is one info series, not constant labels on every series (the
// practice of Prometheus and client_golang: a label every series of a
// target shares is a target label or an info metric to join on, see
// docs/fleet.md). It fails if called twice.
func (m *Metrics) JoinedFleet(id FleetMember, members func() int) error {
	return m.registry.Register(&fleetCollector{id: id, members: members})
}

type fleetCollector struct {
	id      FleetMember
	members func() int
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- fleetInfoDesc
	ch <- fleetMembersDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(fleetInfoDesc, prometheus.GaugeValue, 1, c.id.Fleet, c.id.RunnerID, c.id.Address)
	ch <- prometheus.MustNewConstMetric(fleetMembersDesc, prometheus.GaugeValue, float64(c.members()))
}
