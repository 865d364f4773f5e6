package main

import (
	"time"

	"github.com/spf13/cobra"
)

// fleetFlags are a member's fleet settings (docs/fleet.md), shared by
// `forged daemon` (which joins) and `forged fleet` (which asks a member).
// Every build takes them; only the fleet build (fleetLinked) acts on them,
// and the lean build hands a command that uses them to it (fleet_exec.go).
type fleetFlags struct {
	etcd                  []string
	name, advertise       string
	caFile, cert, keyFile string
	// etcdCA, etcdCert and etcdKey make the etcd client speak TLS.
	etcdCA, etcdCert, etcdKey string
	placement                 bool
	returnGrace               time.Duration
}

// defaultFleetReturnGrace is the fleet's DefaultReturnGrace, spelled here
// so that the lean build need not link the fleet for a flag's default
// (TestFleetDefaultsAreTheFleets keeps the two equal).
const defaultFleetReturnGrace = 2 * time.Second

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
	cmd.Flags().DurationVar(&f.returnGrace, "fleet-return-grace", defaultFleetReturnGrace, "how long this member, as a submitter, waits for a member that left the fleet while running one of its attempts to be listed again (restarted, re-adopting it) before it ends the attempt with sandbox_runner_lost (0: not at all)")
}

// enabled reports whether any setting that makes a daemon a fleet member
// is given (the fleet's Config.Enabled).
func (f *fleetFlags) enabled() bool {
	return len(f.etcd) > 0 || f.name != "" || f.advertise != ""
}

func fleetCommand() *cobra.Command {
	var flags fleetFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "List the fleet's members, their capacity and running attempts, as the member at --fleet-advertise sees them",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !fleetLinked {
				return execFleetBuild()
			}
			return listFleet(cmd, &flags, asJSON)
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the members as JSON")
	return cmd
}

// returnGrace is the fleet Config's ReturnGrace for the flag's value: the
// flag's 0 means none, which the config spells negative (its 0 is the
// default).
func returnGrace(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
