package egress

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/forgedev/forged/internal/kit/text"
)

// DefaultPort is the only port a task may reach unless the operator allows
// more.
const DefaultPort = 443

// Mapping is an operator-trusted host mapping: Name resolves to Addr in
// the proxy (its hosts file), before DNS.
type Mapping struct {
	Name string
	Addr netip.Addr
}

func (m Mapping) String() string { return m.Name + "=" + m.Addr.String() }

// Options are the operator's egress settings, shared by every attempt.
type Options struct {
	// Enabled lets public_allowlist attempts run (the catalogue must also
	// pin an egress image).
	Enabled bool
	// Ports the proxy admits; empty means DefaultPort only. CONNECT and
	// plain requests alike go only to these.
	Ports []int
	// Hosts are operator-trusted mappings written into the proxy's hosts
	// file. Their addresses are the only ones exempted from the private
	// range deny (never from loopback, link-local, metadata, multicast or
	// reserved ranges).
	Hosts []Mapping
	// Upstreams are extra Docker networks the proxy joins besides the
	// attempt's egress network (e.g. where an operator's upstream proxy or
	// mirror lives; tests put their stand-in for the internet there).
	Upstreams []string
}

// AllowedPorts returns the admitted ports, sorted.
func (o Options) AllowedPorts() []int { return o.ports() }

// ports returns the admitted ports, sorted.
func (o Options) ports() []int {
	if len(o.Ports) == 0 {
		return []int{DefaultPort}
	}
	p := slices.Clone(o.Ports)
	slices.Sort(p)
	return slices.Compact(p)
}

// Validate checks the options: ports 1-65535, mappings of valid names to
// valid, specified addresses, each name mapped once, and Docker network
// names. A mapping to a never-allowed address (loopback, link-local, …)
// is accepted but exempts nothing: requests to it are still denied.
func (o Options) Validate() error {
	for _, p := range o.Ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("egress port %d is outside 1-65535", p)
		}
	}
	seen := map[string]bool{}
	for _, m := range o.Hosts {
		if err := checkHostName(m.Name); err != nil {
			return fmt.Errorf("egress host mapping %q: %v", text.Clip(m.Name, 64), err)
		}
		if seen[m.Name] {
			return fmt.Errorf("egress host %s is mapped twice", m.Name)
		}
		seen[m.Name] = true
		if !m.Addr.IsValid() || m.Addr.IsUnspecified() || m.Addr.Zone() != "" {
			return fmt.Errorf("egress host mapping %s: %s is not a usable address", m.Name, m.Addr)
		}
	}
	for _, n := range o.Upstreams {
		if !networkName.MatchString(n) {
			return fmt.Errorf("egress upstream network %q is not a Docker network name", text.Clip(n, 64))
		}
	}
	return nil
}

var networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ParseMapping reads an operator host mapping "name=address".
func ParseMapping(s string) (Mapping, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return Mapping{}, fmt.Errorf("egress host mapping %q: want name=address", text.Clip(s, 64))
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return Mapping{}, fmt.Errorf("egress host mapping %q: %v", text.Clip(s, 64), err)
	}
	m := Mapping{Name: name, Addr: a.Unmap()}
	if err := (Options{Hosts: []Mapping{m}}).Validate(); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

// ParsePort reads an allowed port.
func ParsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("egress port %q is not 1-65535", text.Clip(s, 16))
	}
	return p, nil
}
