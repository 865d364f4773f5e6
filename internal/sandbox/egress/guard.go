package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The netns guard is the layer below squid (docs/security.md, "Egress
// below squid"): an nftables ruleset loaded into the network namespace of
// the egress proxy, and of an open_public worker, before any untrusted
// input reaches it, by a short-lived container with CAP_NET_ADMIN that
// joins the namespace (dockerops.GuardNetns). The processes that run there
// afterwards have no capability, so they cannot change it. Its output
// chain drops by default and admits, in order:
//
//   - loopback (the engine's embedded resolver at 127.0.0.11 included) and
//     the packets of connections already admitted (the replies to the
//     worker's requests to the proxy);
//   - DNS (UDP and TCP port 53) to the host's resolvers only, which the
//     engine's resolver forwards to from inside the namespace;
//   - nothing over IPv6, nothing to the never-allowed ranges (loopback,
//     link-local with the metadata address, multicast, reserved);
//   - TCP to an allowed port of an address the operator mapped a name to
//     (the only exemption from what follows);
//   - nothing to the host's own addresses (every address of every host
//     interface, the bridges' gateways included, read at attempt start);
//   - for an open_public worker, TCP to its attempt network (its services);
//   - nothing to the private ranges (RFC 1918, CGNAT, ...);
//   - TCP to an allowed port anywhere else.

// GuardTable is the nftables table the guard loads.
const GuardTable = "forge_guard"

// GuardFacts are the host facts a guard is made of, read at attempt
// start.
type GuardFacts struct {
	// HostAddrs are the host's own addresses (every interface's).
	HostAddrs []netip.Addr
	// Resolvers are the DNS servers the engine's resolver forwards to.
	Resolvers []netip.Addr
	// Local is the attempt network's subnet an open_public worker reaches
	// its services on; the zero prefix for the egress proxy.
	Local netip.Prefix
}

// GuardRules renders the nft script of a guard: atomic (one transaction)
// and idempotent (it replaces an earlier load of the same table).
func GuardRules(o Options, f GuardFacts) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, "\t\t"+format+"\n", args...) }
	fmt.Fprintf(&b, "add table inet %s\ndelete table inet %s\ntable inet %s {\n\tchain output {\n", GuardTable, GuardTable, GuardTable)
	line("type filter hook output priority filter; policy drop;")
	line(`oifname "lo" accept`)
	line("ct state established,related accept")
	line("meta nfproto ipv6 drop")
	if r := v4Set(f.Resolvers, func(a netip.Addr) bool { return !a.IsLoopback() && !a.IsUnspecified() }); r != "" {
		line("ip daddr %s udp dport 53 accept", r)
		line("ip daddr %s tcp dport 53 accept", r)
	}
	ports := make([]string, 0, len(o.ports()))
	for _, p := range o.ports() {
		ports = append(ports, strconv.Itoa(p))
	}
	portSet := "{ " + strings.Join(ports, ", ") + " }"
	line("ip daddr %s drop", prefixSet(neverRanges))
	if e := v4Set(o.Exempt(), nil); e != "" {
		line("ip daddr %s tcp dport %s accept", e, portSet)
	}
	if h := v4Set(f.HostAddrs, nil); h != "" {
		line("ip daddr %s drop", h)
	}
	if f.Local.IsValid() && f.Local.Addr().Is4() {
		line("ip daddr %s meta l4proto tcp accept", f.Local.Masked())
	}
	line("ip daddr %s drop", prefixSet(privateRanges))
	line("tcp dport %s accept", portSet)
	b.WriteString("\t}\n}\n")
	return b.String()
}

// v4Set renders the IPv4 addresses of addrs that keep passes (nil: all)
// as an nft set, once each; "" when none is left.
func v4Set(addrs []netip.Addr, keep func(netip.Addr) bool) string {
	var out []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() && (keep == nil || keep(a)) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return ""
	}
	slices.SortFunc(out, netip.Addr.Compare)
	out = slices.Compact(out)
	s := make([]string, len(out))
	for i, a := range out {
		s[i] = a.String()
	}
	return "{ " + strings.Join(s, ", ") + " }"
}

// prefixSet renders the IPv4 prefixes of ranges as an nft set.
func prefixSet(ranges []string) string {
	var s []string
	for _, r := range ranges {
		if p := netip.MustParsePrefix(r); p.Addr().Is4() {
			s = append(s, p.String())
		}
	}
	return "{ " + strings.Join(s, ", ") + " }"
}

// Resolver files: the host's, and systemd-resolved's list of its upstream
// servers, which the engine reads instead when the host's names only a
// loopback stub.
var resolverFiles = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// dockerDefaultResolvers are the engine's fallback when the host names no
// usable resolver.
var dockerDefaultResolvers = []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("8.8.4.4")}

// HostResolvers returns the DNS servers the engine's embedded resolver
// forwards to, as the engine chooses them: the host's resolv.conf, or
// systemd-resolved's upstream list when the host's names only loopback
// servers, or the engine's defaults when neither names any.
func HostResolvers() []netip.Addr {
	return hostResolvers(os.ReadFile)
}

func hostResolvers(read func(string) ([]byte, error)) []netip.Addr {
	for _, path := range resolverFiles {
		raw, err := read(path)
		if err != nil {
			continue
		}
		if out := parseResolvers(raw); len(out) > 0 {
			return out
		}
	}
	return slices.Clone(dockerDefaultResolvers)
}

// parseResolvers reads the non-loopback nameservers of a resolv.conf.
func parseResolvers(raw []byte) []netip.Addr {
	var out []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || a.Unmap().IsLoopback() || a.IsUnspecified() {
			continue
		}
		out = append(out, a.Unmap().WithZone(""))
	}
	return out
}
