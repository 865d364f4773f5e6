package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// ruleIndex returns the index of the rule line holding every part, -1
// when none does.
func ruleIndex(rules []string, parts ...string) int {
	for i, r := range rules {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r, p)
		}
		if all {
			return i
		}
	}
	return -1
}

func TestGuardRulesOrderTheExemptionsBeforeTheDenies(t *testing.T) {
	o := Options{Ports: []int{8443, 443}, Hosts: []Mapping{
		{Name: "mirror.test", Addr: netip.MustParseAddr("10.1.2.3")},
		{Name: "meta.test", Addr: netip.MustParseAddr("169.254.169.254")}, // exempts nothing
		{Name: "pub.test", Addr: netip.MustParseAddr("93.184.216.34")},    // public: needs no exemption
	}}
	script := GuardRules(o, GuardFacts{
		HostAddrs: addrs("192.0.2.2", "172.17.0.1", "127.0.0.1", "172.17.0.1", "fe80::1", "100.128.0.9"),
		Resolvers: addrs("10.255.255.53", "127.0.0.53", "::1"),
	})
	t.Log("\n" + script)
	require.True(t, strings.HasPrefix(script, "add table inet forge_guard\ndelete table inet forge_guard\ntable inet forge_guard {"))
	rules := strings.Split(script, "\n")
	policy := ruleIndex(rules, "hook output", "policy drop")
	lo := ruleIndex(rules, `oifname "lo" accept`)
	established := ruleIndex(rules, "ct state established,related accept")
	v6 := ruleIndex(rules, "meta nfproto ipv6 drop")
	dns := ruleIndex(rules, "ip daddr { 10.255.255.53 } udp dport 53 accept")
	never := ruleIndex(rules, "169.254.0.0/16", "drop")
	exempt := ruleIndex(rules, "ip daddr { 10.1.2.3 } tcp dport { 443, 8443 } accept")
	host := ruleIndex(rules, "ip daddr { 100.128.0.9, 127.0.0.1, 172.17.0.1, 192.0.2.2 } drop")
	private := ruleIndex(rules, "10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16", "drop")
	public := ruleIndex(rules, "\t\ttcp dport { 443, 8443 } accept")
	for name, i := range map[string]int{"policy": policy, "lo": lo, "established": established, "v6": v6, "dns": dns, "never": never,
		"exempt": exempt, "host": host, "private": private} {
		require.GreaterOrEqual(t, i, 0, name)
	}
	assert.True(t, policy < lo && lo < established && established < v6 && v6 < dns && dns < never && never < exempt &&
		exempt < host && host < private && private < public, "%v", []int{policy, lo, established, v6, dns, never, exempt, host, private, public})
	assert.Equal(t, len(rules)-4, public, "the allowed ports are the last accept")
	// The metadata mapping exempts nothing, the loopback resolver is the
	// engine's own business, no IPv6 address appears, and no UDP but DNS.
	assert.NotContains(t, script, "169.254.169.254")
	assert.NotContains(t, script, "127.0.0.53")
	assert.NotContains(t, script, "fe80")
	assert.Equal(t, 1, strings.Count(script, "udp"))
	assert.Equal(t, -1, ruleIndex(rules, "meta l4proto tcp accept"), "no local subnet for the proxy")
}

func TestGuardRulesLetAnOpenWorkerReachItsServicesOnly(t *testing.T) {
	script := GuardRules(Options{}, GuardFacts{HostAddrs: addrs("172.30.0.1"), Local: netip.MustParsePrefix("172.30.0.7/16")})
	rules := strings.Split(script, "\n")
	host := ruleIndex(rules, "ip daddr { 172.30.0.1 } drop")
	local := ruleIndex(rules, "ip daddr 172.30.0.0/16 meta l4proto tcp accept")
	private := ruleIndex(rules, "172.16.0.0/12", "drop")
	require.True(t, host >= 0 && local >= 0 && private >= 0, script)
	assert.True(t, host < local && local < private, "the gateway is denied before the subnet is admitted, the subnet before the private deny")
	assert.Contains(t, script, "tcp dport { 443 } accept")
	// With no facts at all the script still denies everything it must.
	bare := GuardRules(Options{}, GuardFacts{})
	assert.Contains(t, bare, "169.254.0.0/16")
	assert.Contains(t, bare, "10.0.0.0/8")
}

func TestHostResolversReadsAsTheEngineDoes(t *testing.T) {
	files := map[string]string{}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("absent")
	}
	files["/etc/resolv.conf"] = "# comment\nnameserver 10.255.255.53\nsearch x\nnameserver 1.1.1.1\nnameserver bogus\n"
	assert.Equal(t, addrs("10.255.255.53", "1.1.1.1"), hostResolvers(read))
	// A loopback stub: systemd-resolved's upstream list.
	files["/etc/resolv.conf"] = "nameserver 127.0.0.53\n"
	files["/run/systemd/resolve/resolv.conf"] = "nameserver 192.168.1.1\n"
	assert.Equal(t, addrs("192.168.1.1"), hostResolvers(read))
	// Nothing usable: the engine's defaults.
	delete(files, "/run/systemd/resolve/resolv.conf")
	assert.Equal(t, addrs("8.8.8.8", "8.8.4.4"), hostResolvers(read))
}
