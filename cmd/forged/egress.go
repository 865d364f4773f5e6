package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/sandbox/egress"
)

// networkFlags are the operator's network policy settings: the egress
// proxy for public_allowlist, and whether open_public may run.
type networkFlags struct {
	egress          bool
	ports           []int
	hosts           []string
	upstreams       []string
	allowOpenPublic bool
}

func (n *networkFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&n.egress, "egress", false, "run the egress proxy for public_allowlist attempts (its image is the service catalogue's egress entry)")
	f.IntSliceVar(&n.ports, "egress-port", []int{egress.DefaultPort}, "ports the egress proxy admits (CONNECT and plain requests alike)")
	f.StringArrayVar(&n.hosts, "egress-host", nil, "NAME=ADDRESS: an operator-trusted mapping in the egress proxy's hosts file; a private ADDRESS is exempted from the private-range deny (repeatable)")
	f.StringArrayVar(&n.upstreams, "egress-upstream-network", nil, "a Docker network the egress proxy joins besides its own egress network (repeatable)")
	f.BoolVar(&n.allowOpenPublic, "allow-open-public", false, "let open_public attempts run on a routed network (never under sandbox_required)")
}

// options returns the validated egress options.
func (n *networkFlags) options() (egress.Options, error) {
	o := egress.Options{Enabled: n.egress, Ports: n.ports, Upstreams: n.upstreams}
	for _, h := range n.hosts {
		m, err := egress.ParseMapping(h)
		if err != nil {
			return egress.Options{}, fmt.Errorf("--egress-host: %w", err)
		}
		o.Hosts = append(o.Hosts, m)
	}
	if err := o.Validate(); err != nil {
		return egress.Options{}, fmt.Errorf("--egress-*: %w", err)
	}
	return o, nil
}
