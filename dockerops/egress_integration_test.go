package dockerops

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/testkit/egresstest"
)

// egressTask is the hostile task of issue 14, in busybox sh: every check
// prints one line "<name> <result>". It speaks HTTP to the proxy itself
// (nc), so what it proves is the proxy's doing, not a client's choice.
func egressTask(standIn string) string {
	return strings.Join([]string{
		// The request's sender holds its side open a moment: squid drops a
		// half-closed client's request (half_closed_clients off).
		`ask() { (printf "$2"; sleep 2) | nc -w 5 egress 3128 2>/dev/null | tr -d '\r' >/tmp/$1; echo "$1 $(head -n 1 /tmp/$1 | cut -d' ' -f2) $(grep -c ` + egresstest.Page + ` /tmp/$1)"; }`,
		// The allowlisted name, through a CONNECT tunnel to 443 (the
		// stand-in speaks plain HTTP inside it) and as a plain request.
		`ask tunnel 'CONNECT www.test:443 HTTP/1.1\r\nHost: www.test:443\r\n\r\nGET / HTTP/1.0\r\nHost: www.test\r\n\r\n'`,
		`ask plain 'GET http://www.test:443/ HTTP/1.1\r\nHost: www.test:443\r\nConnection: close\r\n\r\n'`,
		// A name off the list, port 22, port 80.
		`ask unlisted 'CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n'`,
		`ask port22 'CONNECT www.test:22 HTTP/1.1\r\nHost: www.test:22\r\n\r\n'`,
		`ask port80 'GET http://www.test/ HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n\r\n'`,
		// The stand-in's own address as a literal.
		`ask literal 'CONNECT ` + standIn + `:443 HTTP/1.1\r\nHost: ` + standIn + `:443\r\n\r\n'`,
		// Listed names that resolve to loopback, the metadata address and
		// an unmapped private address (the engine's resolver answers it).
		`ask loopback 'CONNECT loop.test:443 HTTP/1.1\r\nHost: loop.test:443\r\n\r\n'`,
		`ask metadata 'CONNECT meta.test:443 HTTP/1.1\r\nHost: meta.test:443\r\n\r\n'`,
		`ask intranet 'CONNECT ` + egresstest.IntranetName + `:443 HTTP/1.1\r\nHost: ` + egresstest.IntranetName + `:443\r\n\r\n'`,
		// Bypassing the proxy.
		`for p in 443 80 22; do if echo x | nc -w 3 ` + standIn + ` $p >/dev/null 2>&1; then echo "direct-$p reached"; else echo "direct-$p failed"; fi; done`,
		`for n in www.test other.test deb.debian.org; do if nslookup $n >/dev/null 2>&1; then echo "dns-$n resolved"; else echo "dns-$n failed"; fi; done`,
		`echo "env $HTTPS_PROXY $https_proxy $NO_PROXY"`,
		`echo egress-done`,
	}, "\n")
}

// startEgress runs the egress proxy for sandbox s (isolated), joined to the
// stand-in network, and follows its access log.
func startEgress(t *testing.T, s *sandbox, standIn egresstest.StandIn, image string) (string, func() []egress.Access) {
	t.Helper()
	ctx := testCtx(t)
	c := s.c
	opts := egress.Options{
		Enabled: true,
		Hosts: []egress.Mapping{
			{Name: "www.test", Addr: netip.MustParseAddr(standIn.Addr)},
			{Name: "loop.test", Addr: netip.MustParseAddr("127.0.0.1")},
			{Name: "meta.test", Addr: netip.MustParseAddr("169.254.169.254")},
		},
		Upstreams: []string{standIn.Network},
	}
	require.NoError(t, opts.Validate())
	domains, err := egress.Domains([]string{"www.test", "loop.test", "meta.test", egresstest.IntranetName})
	require.NoError(t, err)
	_, err = c.CreateRoutedNetwork(ctx, s.names.Network+"-egress", s.labels, false)
	require.NoError(t, err)
	id, err := c.CreateSidecar(ctx, EgressSpec{
		Name: s.names.Prefix + "-egress", Image: image,
		EgressNetwork: s.names.Network + "-egress", AttemptNetwork: s.names.Network, Alias: egress.Alias,
		Upstreams: opts.Upstreams, UID: egress.UID, RunDir: egress.RunDir,
		Config: egress.SquidConfig(domains, opts), Hosts: egress.HostsFile(opts),
		Labels: s.labels, MemoryBytes: 256 << 20,
		Guard: NetGuard{Name: s.names.Prefix + "-guard-egress", Image: image, Labels: s.labels, Rules: egress.GuardRules(opts, guardFacts(t))},
	})
	require.NoError(t, err)

	var mu sync.Mutex
	var records []egress.Access
	logCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.FollowLogLines(logCtx, id, egress.MaxLogLine, func(line []byte) {
			if a, err := egress.ParseLine(line); err == nil {
				mu.Lock()
				records = append(records, a)
				mu.Unlock()
			}
		})
	}()
	t.Cleanup(func() { stop(); <-done })

	// Ready: the proxy answers (a denied request) from the attempt network.
	code, stderr, err := c.RunProbe(ctx, ProbeSpec{
		Name: s.names.Prefix + "-probe-egress", Image: agentImage(t), Network: s.names.Network,
		Labels: s.labels, SecretsVolume: s.names.SecretsVolume, Timeout: 30 * time.Second,
		Cmd: []string{"/bin/sh", "-c", `for i in $(seq 1 60); do if printf 'CONNECT probe.forge.invalid:443 HTTP/1.1\r\n\r\n' | nc -w 2 egress 3128 | grep -q '^HTTP/1.1 403'; then exit 0; fi; sleep 0.5; done; exit 1`},
	})
	require.NoError(t, err)
	require.Equal(t, 0, code, stderr)
	return id, func() []egress.Access {
		mu.Lock()
		defer mu.Unlock()
		return append([]egress.Access(nil), records...)
	}
}

// TestIntegrationEgressProxyAdmitsOnlyTheAllowlist runs a task on an
// isolated attempt network whose only way out is the egress proxy, against
// a stand-in for the internet on a network of its own.
func TestIntegrationEgressProxyAdmitsOnlyTheAllowlist(t *testing.T) {
	c := requireEngine(t)
	image := egresstest.EgressImage(t, "..")
	standIn := egresstest.Start(t, c.raw, baseImage(t))
	s := provisionWith(t, egressTask(standIn.Addr), true, func(spec *WorkerSpec) {
		spec.Env = append(spec.Env, egress.WorkerEnv([]string{"postgres"})...)
	})
	_, records := startEgress(t, s, standIn, image)

	lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, lines, "egress-done", "%q %s", lines, res.Stderr)
	got := map[string]string{}
	for _, l := range lines {
		if name, rest, ok := strings.Cut(l, " "); ok {
			got[name] = rest
		}
	}
	t.Logf("task: %q", lines)
	// "<status> <count of the stand-in's page>"
	assert.Equal(t, "200 1", got["tunnel"], "the allowlisted name through a CONNECT tunnel to 443")
	assert.Equal(t, "200 1", got["plain"], "the allowlisted name as a plain request on 443")
	for _, denied := range []string{"unlisted", "port22", "port80", "literal", "loopback", "metadata", "intranet"} {
		assert.Equal(t, "403 0", got[denied], denied)
	}
	for _, p := range []string{"443", "80", "22"} {
		assert.Equal(t, "failed", got["direct-"+p], "a direct connection to the stand-in's port %s", p)
	}
	for _, n := range []string{"www.test", "other.test", "deb.debian.org"} {
		assert.Equal(t, "failed", got["dns-"+n], "the worker resolved %s", n)
	}
	assert.Equal(t, fmt.Sprintf("%s %s localhost,127.0.0.1,::1,postgres", egress.ProxyURL, egress.ProxyURL), got["env"])

	// The access log names what the task tried, allowed and denied.
	want := map[string]egress.Decision{"www.test:443": egress.Allowed, "other.test:443": egress.Denied, "www.test:22": egress.Denied,
		"www.test:80": egress.Denied, "loop.test:443": egress.Denied, "meta.test:443": egress.Denied, egresstest.IntranetName + ":443": egress.Denied,
		standIn.Addr + ":443": egress.Denied}
	require.Eventually(t, func() bool {
		seen := map[string]bool{}
		for _, r := range records() {
			if d, ok := want[fmt.Sprintf("%s:%d", r.Host, r.Port)]; ok && d == r.Decision {
				seen[fmt.Sprintf("%s:%d", r.Host, r.Port)] = true
			}
		}
		return len(seen) == len(want)
	}, 10*time.Second, 50*time.Millisecond, "records %+v", records())
	for _, r := range records() {
		if r.Host == "www.test" && r.Port == 443 && r.Method == "CONNECT" {
			assert.Positive(t, r.Bytes, "the tunnel's bytes are counted")
		}
	}
}
