package egress

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSquidConfigAdmitsOnlyListedNamesOnAllowedPorts(t *testing.T) {
	conf := SquidConfig([]string{".pypi.org", "github.com"}, Options{})
	lines := strings.Split(conf, "\n")
	assert.Contains(t, lines, "acl forge_ports port 443")
	assert.Contains(t, lines, "acl forge_allowed dstdomain -n .pypi.org github.com")
	assert.Contains(t, lines, "access_log stdio:/dev/stdout logformat=forge1")
	assert.Contains(t, lines, "hosts_file /run/forge-egress/hosts")
	// The order of the rules is the policy: ports, names (before any DNS
	// lookup), never-allowed, private, then allow, then deny all.
	var rules []string
	for _, l := range lines {
		if strings.HasPrefix(l, "http_access ") {
			rules = append(rules, l)
		}
	}
	assert.Equal(t, []string{
		"http_access deny !forge_ports",
		"http_access deny CONNECT !forge_ports",
		"http_access deny !forge_allowed",
		"http_access deny forge_never",
		"http_access deny forge_private",
		"http_access allow forge_allowed",
		"http_access deny all",
	}, rules)
	never := aclAddresses(t, conf, "forge_never")
	for _, a := range []string{"127.0.0.1", "169.254.169.254", "0.0.0.0", "::1", "fe80::1", "224.0.0.1", "::ffff:10.0.0.1", "fd00:ec2::254"} {
		assert.True(t, containsAddr(never, netip.MustParseAddr(a)), a)
	}
	private := aclAddresses(t, conf, "forge_private")
	for _, a := range []string{"10.1.2.3", "172.17.0.2", "192.168.1.1", "100.64.0.1", "fd12::1", "198.18.0.1"} {
		assert.True(t, containsAddr(private, netip.MustParseAddr(a)), a)
	}
	assert.False(t, containsAddr(private, netip.MustParseAddr("93.184.216.34")))
	assert.False(t, containsAddr(never, netip.MustParseAddr("93.184.216.34")))
}

func TestSquidConfigExemptsExactlyTheMappedPrivateAddresses(t *testing.T) {
	o := Options{Ports: []int{443, 8443, 443}, Hosts: []Mapping{
		{Name: "www.test", Addr: netip.MustParseAddr("172.30.5.7")},
		{Name: "loop.test", Addr: netip.MustParseAddr("127.0.0.1")},
		{Name: "pub.test", Addr: netip.MustParseAddr("93.184.216.34")},
	}}
	require.NoError(t, o.Validate())
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("172.30.5.7")}, o.Exempt())
	conf := SquidConfig([]string{"www.test"}, o)
	assert.Contains(t, conf, "acl forge_ports port 443 8443\n")
	private := aclAddresses(t, conf, "forge_private")
	assert.False(t, containsAddr(private, netip.MustParseAddr("172.30.5.7")))
	for _, a := range []string{"172.30.5.6", "172.30.5.8", "172.16.0.0", "172.31.255.255", "10.0.0.1"} {
		assert.True(t, containsAddr(private, netip.MustParseAddr(a)), a)
	}
	// Loopback stays denied although mapped.
	assert.True(t, containsAddr(aclAddresses(t, conf, "forge_never"), netip.MustParseAddr("127.0.0.1")))
	assert.Equal(t, "172.30.5.7 www.test\n127.0.0.1 loop.test\n93.184.216.34 pub.test\n", HostsFile(o))
}

func TestOptionsValidate(t *testing.T) {
	m, err := ParseMapping("www.test=172.18.0.2")
	require.NoError(t, err)
	assert.Equal(t, "www.test=172.18.0.2", m.String())
	for _, bad := range []string{"www.test", "www.test=", "=1.2.3.4", "1.2.3.4=1.2.3.4", "www.test=0.0.0.0", "www.test=::", "www.test=fe80::1%eth0", "WWW.test=1.2.3.4", "a b.test=1.2.3.4"} {
		_, err := ParseMapping(bad)
		assert.Error(t, err, bad)
	}
	assert.Error(t, Options{Hosts: []Mapping{m, m}}.Validate())
	assert.Error(t, Options{Ports: []int{0}}.Validate())
	assert.Error(t, Options{Ports: []int{65536}}.Validate())
	assert.Error(t, Options{Upstreams: []string{"bad name"}}.Validate())
	assert.NoError(t, Options{Upstreams: []string{"forged-test_net.1"}}.Validate())
	p, err := ParsePort("8443")
	require.NoError(t, err)
	assert.Equal(t, 8443, p)
	for _, bad := range []string{"", "0", "65536", "-1", "44a", "0x1bb"} {
		_, err := ParsePort(bad)
		assert.Error(t, err, bad)
	}
}

func TestWithoutCoversThePrefixLessOneAddress(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/29")
	a := netip.MustParseAddr("10.0.0.5")
	parts := without(p, a)
	for i := range 8 {
		addr := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		assert.Equal(t, addr != a, containsAddr(parts, addr), addr.String())
	}
	assert.Len(t, parts, 3)
}

func FuzzSquidConfig(f *testing.F) {
	f.Add("www.test", "172.20.0.2", uint16(443))
	f.Add("*.example.com", "10.0.0.1", uint16(8443))
	f.Fuzz(func(t *testing.T, host, addr string, port uint16) {
		domains, err := Domains([]string{host})
		if err != nil {
			return
		}
		o := Options{Ports: []int{int(port)}}
		if m, err := ParseMapping("mapped.test=" + addr); err == nil {
			o.Hosts = []Mapping{m}
		}
		if o.Validate() != nil {
			return
		}
		conf := SquidConfig(domains, o)
		// Every line is one directive the generator wrote: the inputs
		// never add a line or a directive.
		for _, l := range strings.Split(strings.TrimSuffix(conf, "\n"), "\n") {
			require.Regexp(t, `^(#|[a-z_]+ )`, l)
		}
		deny := aclAddresses(t, conf, "forge_private")
		for _, e := range o.Exempt() {
			require.False(t, containsAddr(deny, e))
			require.False(t, neverAllowed(e))
		}
		// Every private address but the exempted ones stays denied.
		for _, m := range o.Hosts {
			next := m.Addr.Next()
			if next.IsValid() && private(next) && !slices.Contains(o.Exempt(), next) {
				require.True(t, containsAddr(deny, next), next.String())
			}
		}
	})
}

func aclAddresses(t *testing.T, conf, name string) []netip.Prefix {
	t.Helper()
	for _, l := range strings.Split(conf, "\n") {
		rest, ok := strings.CutPrefix(l, "acl "+name+" dst ")
		if !ok {
			continue
		}
		var out []netip.Prefix
		for _, f := range strings.Fields(rest) {
			out = append(out, netip.MustParsePrefix(f))
		}
		return out
	}
	t.Fatalf("no acl %s", name)
	return nil
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
