// Package egress is the policy side of the egress proxy that serves
// networkPolicy.mode public_allowlist: it validates a dispatch's allowlist,
// the operator's egress options (extra ports, trusted host mappings,
// upstream networks), generates the proxy's squid configuration and hosts
// file from them, parses the proxy's access log into bounded records, and
// names what the worker gets (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
//
// The proxy is squid, run from the operator catalogue's digest-pinned
// `egress` image (scripts/service-images.sh builds it offline from
// Debian's squid package) as Debian's proxy user (uid 13). It is the only
// container on both the attempt's isolated network (under the alias
// "egress") and the attempt's egress network, so the worker reaches the
// outside only through it. The generated configuration:
//
//   - admits only the allowlisted names (host names and `*.` wildcards; IP
//     literals are refused before anything is created, and an IP-literal
//     request never matches a name), checked before any DNS lookup, so a
//     name off the list never leaves the proxy, not even as a DNS query;
//   - admits only the allowed ports (443, plus those the operator allows),
//     for CONNECT and plain requests alike;
//   - denies destinations in loopback, link-local (the cloud metadata
//     address 169.254.169.254 included), unspecified, multicast and
//     reserved ranges always, and in private ranges (RFC 1918, CGNAT,
//     benchmarking, unique local) unless the address is one the operator
//     mapped a name to. squid's dst ACL applies to every address a name
//     resolves to, so a listed name that resolves there is refused too;
//   - logs one line per request to its stdout in the forge1 format
//     (ParseLine), which forged reads through the engine's log stream.
//
// Below squid, GuardRules renders the netns guard's nftables rules
// (guard.go) for the proxy's network namespace and an open_public
// worker's.
package egress
