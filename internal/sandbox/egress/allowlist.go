package egress

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// MaxHosts bounds an allowlist (as the dispatch's decoder does).
const MaxHosts = 128

// hostLabel is one DNS label: lowercase letters, digits and inner hyphens.
var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// numericLabel is a last label that inet_aton-style parsers read as part
// of an address (decimal, octal or hexadecimal).
var numericLabel = regexp.MustCompile(`^([0-9]+|0x[0-9a-f]*)$`)

// Domains validates a dispatch's allowlist and returns squid's dstdomain
// entries: a host name stays as it is, `*.example.com` becomes
// `.example.com` (squid's form: example.com and every name under it).
// Entries must be lowercase host names of at least two labels, at most 253
// bytes, optionally starting with `*.`; IP literals (also a name whose last
// label is all digits, which resolvers read as an address) are refused. A
// name already covered by a wildcard of the list is dropped (squid refuses
// the overlap). Failures carry failure.SandboxEgressPolicyInvalid.
func Domains(hosts []string) ([]string, error) {
	if len(hosts) == 0 || len(hosts) > MaxHosts {
		return nil, failure.New(failure.SandboxEgressPolicyInvalid, "public_allowlist needs 1-%d allowed hosts, not %d", MaxHosts, len(hosts))
	}
	var wild, exact []string
	for i, h := range hosts {
		name, isWild := strings.CutPrefix(h, "*.")
		if err := checkHostName(name); err != nil {
			return nil, failure.New(failure.SandboxEgressPolicyInvalid, "allowedHosts[%d] %q: %v", i, text.Clip(h, 64), err)
		}
		if isWild {
			wild = append(wild, name)
		} else {
			exact = append(exact, name)
		}
	}
	slices.Sort(wild)
	wild = slices.Compact(wild)
	// A wildcard under another wildcard is covered by it.
	var keptWild []string
	for _, w := range wild {
		if !coveredBy(w, wild, true) {
			keptWild = append(keptWild, w)
		}
	}
	out := make([]string, 0, len(keptWild)+len(exact))
	for _, w := range keptWild {
		out = append(out, "."+w)
	}
	slices.Sort(exact)
	for _, e := range slices.Compact(exact) {
		if !coveredBy(e, keptWild, false) {
			out = append(out, e)
		}
	}
	return out, nil
}

// coveredBy reports whether name equals (unless strict) or lies under one
// of the wildcard bases.
func coveredBy(name string, bases []string, strict bool) bool {
	for _, b := range bases {
		if strings.HasSuffix(name, "."+b) || (!strict && name == b) {
			return true
		}
	}
	return false
}

// checkHostName refuses anything but a lowercase host name of two or more
// labels that cannot be read as an address.
func checkHostName(name string) error {
	if len(name) == 0 || len(name) > 253 {
		return fmt.Errorf("must be 1-253 bytes")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return fmt.Errorf("IP literals are not allowed, only host names")
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return fmt.Errorf("must have at least two labels")
	}
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("label %q is not a lowercase host name label", text.Clip(l, 64))
		}
	}
	if numericLabel.MatchString(labels[len(labels)-1]) {
		return fmt.Errorf("a numeric last label reads as an IP address")
	}
	return nil
}
