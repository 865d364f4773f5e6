//go:build fleet

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/fleet"
	preflightpkg "github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/termsafe"
)

// fleetLinked: this is the fleet build (forged-fleet), which links the
// fleet's stack (etcd's client, gRPC, Proto.Actor's remote and cluster).
const fleetLinked = true

func (f *fleetFlags) config(logger *slog.Logger) fleet.Config {
	return fleet.Config{Endpoints: f.etcd, Name: f.name, Advertise: f.advertise,
		CAFile: f.caFile, CertFile: f.cert, KeyFile: f.keyFile,
		EtcdCAFile: f.etcdCA, EtcdCertFile: f.etcdCert, EtcdKeyFile: f.etcdKey,
		Placement: f.placement, ReturnGrace: returnGrace(f.returnGrace), Logger: logger}
}

// listFleet prints the fleet's members as the member at --fleet-advertise
// sees them (`forged fleet`).
func listFleet(cmd *cobra.Command, flags *fleetFlags, asJSON bool) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	members, err := fleet.QueryDirectory(ctx, flags.config(nil))
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(members)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUNNER\tADDRESS\tSLOTS\tFREE\tACTIVE\tQUEUED\tHEADROOM\tPREFLIGHT\tDRAINING\tATTEMPTS")
	for _, m := range members {
		if m.GetError() != "" {
			fmt.Fprintf(w, "?\t%s\t-\t-\t-\t-\t-\tunreachable: %s\t-\t-\n", termsafe.String(m.GetAddress()), termsafe.String(m.GetError()))
			continue
		}
		preflight := "ok"
		if !m.GetPreflightAvailable() {
			preflight = termsafe.String(m.GetPreflightCode())
		}
		// What one more attempt may reserve there (placement weighs
		// a dispatch's requested resources against it).
		headroom := "-"
		if m.GetHeadroomKnown() {
			headroom = fmt.Sprintf("%s/%dm", preflightpkg.FormatBytes(max(m.GetHeadroomMemoryBytes(), 0)), max(m.GetHeadroomCpuMillis(), 0))
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%t\t%s\n", m.GetRunnerId(), termsafe.String(m.GetAddress()),
			m.GetSlots(), m.GetFreeSlots(), m.GetActive(), m.GetQueued(), headroom, preflight, m.GetDraining(), strings.Join(m.GetAttempts(), ","))
	}
	return w.Flush()
}

// fleetDaemon is a daemon's membership of its fleet; nil when it runs
// alone (every method is then a no-op).
type fleetDaemon struct {
	cfg    fleet.Config
	member *fleet.Member
}

// prepareDaemon returns the daemon's membership when any fleet setting is
// given (nil, nil when none is), and fences the runner's branch moves: every
// branch a member moves is claimed in the fleet first, so an attempt
// declared lost is fenced (docs/fleet.md). Call it before the runner is made.
func (f *fleetFlags) prepareDaemon(cfg *runner.Config, logger *slog.Logger) (*fleetDaemon, error) {
	fc := f.config(logger)
	if !fc.Enabled() {
		return nil, nil
	}
	fc.Fence = fleet.NewFence()
	cfg.Fence = fc.Fence.Check
	return &fleetDaemon{cfg: fc}, nil
}

// join joins the fleet with the runner r and returns what the API serves:
// r, routed through the fleet. Call leave after it, whatever it returned.
func (d *fleetDaemon) join(r *runner.Runner, logger *slog.Logger) (httpapi.Runner, error) {
	if d == nil {
		return r, nil
	}
	member, err := fleet.Join(d.cfg, r)
	if err != nil {
		return nil, err
	}
	d.member = member
	logger.Warn("forged joined the fleet", "fleet", d.cfg.Name, "address", member.Address(), "member", member.MemberID(), "runner", r.RunnerID())
	// The metrics name the member (docs/fleet.md, Metrics).
	id := metrics.FleetMember{Fleet: d.cfg.Name, RunnerID: r.RunnerID(), Address: member.Address()}
	if err := r.Metrics().JoinedFleet(id, member.MemberCount); err != nil {
		return nil, fmt.Errorf("fleet: metrics: %w", err)
	}
	return fleet.Routed{Runner: r, Member: member}, nil
}

// setDraining tells the fleet this member admits nothing more.
func (d *fleetDaemon) setDraining(draining bool) {
	if d != nil && d.member != nil {
		d.member.SetDraining(draining)
	}
}

// leave leaves the fleet, if joined.
func (d *fleetDaemon) leave() {
	if d != nil && d.member != nil {
		d.member.Leave()
	}
}
