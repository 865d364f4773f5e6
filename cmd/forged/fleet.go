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

	"github.com/forgedev/forged/internal/fleet"
	preflightpkg "github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/termsafe"
)

// fleetFlags are a member's fleet settings (docs/fleet.md), shared by
// `forged daemon` (which joins) and `forged fleet` (which asks a member).
type fleetFlags struct {
	etcd                  []string
	name, advertise       string
	caFile, cert, keyFile string
	// etcdCA, etcdCert and etcdKey make the etcd client speak TLS.
	etcdCA, etcdCert, etcdKey string
	placement                 bool
	returnGrace               time.Duration
}

func (f *fleetFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.etcd, "fleet-etcd", nil, "etcd client URLs of the fleet (comma-separated); with --fleet-name and --fleet-advertise the daemon joins the fleet (default: it runs alone)")
	cmd.Flags().StringVar(&f.name, "fleet-name", "", "the fleet's name: its members register in etcd below /forged/fleet/NAME")
	cmd.Flags().StringVar(&f.advertise, "fleet-advertise", "", "host:port of this member's cluster port (mutual TLS), which it listens on and the other members dial")
	cmd.Flags().StringVar(&f.caFile, "fleet-ca", "", "the fleet CA's certificate (PEM): the cluster port accepts only certificates it signed")
	cmd.Flags().StringVar(&f.cert, "fleet-cert", "", "this member's certificate (PEM, signed by the fleet CA, naming the advertised host)")
	cmd.Flags().StringVar(&f.keyFile, "fleet-key", "", "this member's private key (PEM)")
	cmd.Flags().StringVar(&f.etcdCA, "fleet-etcd-ca", "", "the CA (PEM) that signed etcd's server certificate: the etcd client speaks TLS, and every --fleet-etcd URL must be https:// (default: plain http)")
	cmd.Flags().StringVar(&f.etcdCert, "fleet-etcd-cert", "", "this member's etcd client certificate (PEM), for an etcd that requires client certificates; with --fleet-etcd-key")
	cmd.Flags().StringVar(&f.etcdKey, "fleet-etcd-key", "", "the key (PEM) of --fleet-etcd-cert")
}

// registerPlacement adds the daemon's placement switch.
func (f *fleetFlags) registerPlacement(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.placement, "fleet-placement", false, "place a dispatch whose execution.runnerId is the nil UUID on the member with the most room for its requested resources (default: refused)")
	cmd.Flags().DurationVar(&f.returnGrace, "fleet-return-grace", fleet.DefaultReturnGrace, "how long this member, as a submitter, waits for a member that left the fleet while running one of its attempts to be listed again (restarted, re-adopting it) before it ends the attempt with sandbox_runner_lost (0: not at all)")
}

func (f *fleetFlags) config(logger *slog.Logger) fleet.Config {
	return fleet.Config{Endpoints: f.etcd, Name: f.name, Advertise: f.advertise,
		CAFile: f.caFile, CertFile: f.cert, KeyFile: f.keyFile,
		EtcdCAFile: f.etcdCA, EtcdCertFile: f.etcdCert, EtcdKeyFile: f.etcdKey,
		Placement: f.placement, ReturnGrace: returnGrace(f.returnGrace), Logger: logger}
}

func fleetCommand() *cobra.Command {
	var flags fleetFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "List the fleet's members, their capacity and running attempts, as the member at --fleet-advertise sees them",
		RunE: func(cmd *cobra.Command, _ []string) error {
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
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the members as JSON")
	return cmd
}

// joinFleet joins the fleet when any fleet setting is given (nil, nil when
// none is: the daemon runs alone, as without a fleet).
func joinFleet(cfg fleet.Config, local fleet.Local, logger *slog.Logger) (*fleet.Member, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	member, err := fleet.Join(cfg, local)
	if err != nil {
		return nil, err
	}
	logger.Warn("forged joined the fleet", "fleet", cfg.Name, "address", member.Address(), "member", member.MemberID(), "runner", local.RunnerID())
	return member, nil
}

// returnGrace is fleet.Config's ReturnGrace for the flag's value: the
// flag's 0 means none, which the config spells negative (its 0 is the
// default).
func returnGrace(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
