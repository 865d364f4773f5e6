// Package fleet makes a forged daemon one member of a fleet of runner
// hosts: a Proto.Actor cluster whose membership lives in etcd (the
// cluster's etcd provider), with mutual TLS on the cluster port.
//
// A member's fleet identity is its persistent runner id, the id a dispatch
// names in execution.runnerId. Proto.Actor's own member id is random per
// process; the directory (Directory, Lookup) maps runner ids to members by
// asking every member the cluster lists for its state (fleetpb.MemberState:
// slots, free slots, preflight, draining, running attempts). A dispatch
// submitted to any member is forwarded to the member its runner id names
// (Submit, Cancel).
//
// The fleet runs on an actor system of its own beside the attempt tree's;
// it reaches the runner only through Local. docs/fleet.md is the operator's
// page.
package fleet
