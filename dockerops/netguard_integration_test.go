package dockerops

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/testkit/egresstest"
)

// hostTraps adds the stand-in host addresses (egresstest) and listens on
// ports 80 and 443 of each.
func hostTraps(t *testing.T) []*egresstest.Trap {
	t.Helper()
	var traps []*egresstest.Trap
	for _, a := range egresstest.AddHostAddresses(t) {
		for _, p := range []string{"80", "443"} {
			traps = append(traps, egresstest.Listen(t, net.JoinHostPort(a, p)))
		}
	}
	return traps
}

// gatewayTrap listens on port 443 of network's gateway on this host.
func gatewayTrap(t *testing.T, c *Client, name string) *egresstest.Trap {
	t.Helper()
	nw, err := c.raw.NetworkInspect(testCtx(t), name, network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, nw.IPAM.Config)
	gw := nw.IPAM.Config[0].Gateway
	require.NotEmpty(t, gw, "network %s has no gateway", name)
	return egresstest.Listen(t, net.JoinHostPort(gw, "443"))
}

// guardFacts are the host facts as forged reads them at attempt start.
func guardFacts(t *testing.T) egress.GuardFacts {
	t.Helper()
	ifaces, err := LocalInterfaces()
	require.NoError(t, err)
	f := egress.GuardFacts{Resolvers: egress.HostResolvers()}
	for _, ifc := range ifaces {
		for _, p := range ifc.Addrs {
			f.HostAddrs = append(f.HostAddrs, p.Addr())
		}
	}
	return f
}

// execIn runs script with bash in a running container as its own user and
// returns its stdout.
func execIn(t *testing.T, c *Client, id, script string) string {
	t.Helper()
	ctx := testCtx(t)
	created, err := c.raw.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"/bin/bash", "-c", script}, AttachStdout: true, AttachStderr: true})
	require.NoError(t, err)
	att, err := c.raw.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	require.NoError(t, err)
	defer att.Close()
	var out, errOut bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &errOut, att.Reader)
	require.NoError(t, err)
	t.Logf("exec stderr: %s", errOut.String())
	return out.String()
}

// dialScript tries a TCP connection to every target ("addr port") at
// once, printing "<addr>:<port> reached" or "... failed".
func dialScript(targets []string) string {
	var b strings.Builder
	for _, tg := range targets {
		a, p, _ := strings.Cut(tg, " ")
		fmt.Fprintf(&b, "(if timeout 4 bash -c 'exec 3<>/dev/tcp/%s/%s' 2>/dev/null; then echo '%s:%s reached'; else echo '%s:%s failed'; fi) &\n", a, p, a, p, a, p)
	}
	b.WriteString("wait\n")
	return b.String()
}

// unguarded is an egress spec's sidecar without its guard: the control.
type unguarded struct{ spec EgressSpec }

func (u unguarded) Sidecar() (SidecarSpec, error) {
	s := u.spec.sidecar()
	s.Guard = nil
	return s, nil
}

// TestIntegrationEgressGuardHoldsAgainstTheProxyItself is the attack of
// issue 28: squid is compromised, and the proxy container itself dials the
// host's bridge gateway, the metadata address and a public address of the
// host, on an allowed port. Unguarded (the control), each is reached; with
// the netns guard none is, while the allowed destination (a mapped
// address on an allowed port, and the allowlisted name through squid)
// still works.
func TestIntegrationEgressGuardHoldsAgainstTheProxyItself(t *testing.T) {
	c := requireEngine(t)
	image := egresstest.EgressImage(t, "..")
	standIn := egresstest.Start(t, c.raw, baseImage(t))
	traps := hostTraps(t)

	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			s := provisionWith(t, "true", true, nil)
			ctx := testCtx(t)
			opts := egress.Options{Enabled: true, Upstreams: []string{standIn.Network},
				Hosts: []egress.Mapping{{Name: "www.test", Addr: netip.MustParseAddr(standIn.Addr)}}}
			domains, err := egress.Domains([]string{"www.test"})
			require.NoError(t, err)
			egressNet := s.names.Network + "-egress"
			_, err = c.CreateRoutedNetwork(ctx, egressNet, s.labels, false)
			require.NoError(t, err)
			gw := gatewayTrap(t, c, egressNet)
			facts := guardFacts(t)
			spec := EgressSpec{
				Name: s.names.Prefix + "-egress", Image: image,
				EgressNetwork: egressNet, AttemptNetwork: s.names.Network, Alias: egress.Alias,
				Upstreams: opts.Upstreams, UID: egress.UID, RunDir: egress.RunDir,
				Config: egress.SquidConfig(domains, opts), Hosts: egress.HostsFile(opts),
				Labels: s.labels, MemoryBytes: 256 << 20,
				Guard: NetGuard{Name: s.names.Prefix + "-guard-egress", Image: image, Labels: s.labels, Rules: egress.GuardRules(opts, facts)},
			}
			var proxy Sidecar = spec
			if !guarded {
				proxy = unguarded{spec}
			}
			start := time.Now()
			id, err := c.CreateSidecar(ctx, proxy)
			require.NoError(t, err)
			t.Logf("proxy created, joined, started (guarded=%v) in %s", guarded, time.Since(start))

			targets := []string{gw.Addr}
			for _, tr := range traps {
				targets = append(targets, tr.Addr)
			}
			for i, tg := range targets {
				h, p, _ := net.SplitHostPort(tg)
				targets[i] = h + " " + p
			}
			allowed := standIn.Addr + " 443"
			if guarded {
				// The compromised proxy first tries to drop the rules: it
				// has no capability to.
				flush := execIn(t, c, id, `nft flush ruleset >/dev/null 2>&1; echo "flush=$?"; nft delete table inet forge_guard >/dev/null 2>&1; echo "delete=$?"`)
				assert.NotContains(t, flush, "flush=0")
				assert.NotContains(t, flush, "delete=0")
			}
			out := execIn(t, c, id, dialScript(append(targets, allowed, standIn.Addr+" 22")))
			t.Logf("proxy dials:\n%s", out)
			// squid still serves the allowlisted name (it may take a moment
			// to listen).
			var page string
			require.Eventually(t, func() bool {
				page = execIn(t, c, id, `exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://www.test:443/ HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3`)
				return strings.Contains(page, egresstest.Page)
			}, 30*time.Second, 200*time.Millisecond, "squid serves www.test: %q", page)

			assert.Contains(t, out, standIn.Addr+":443 reached", "the mapped destination on an allowed port")
			for _, tr := range append([]*egresstest.Trap{gw}, traps...) {
				if guarded {
					assert.Contains(t, out, tr.Addr+" failed")
					assert.Zero(t, tr.Accepted(), "%s was reached", tr.Addr)
				} else {
					assert.Contains(t, out, tr.Addr+" reached")
					assert.Positive(t, tr.Accepted(), "the control must reach %s", tr.Addr)
				}
			}
			if guarded {
				assert.Contains(t, out, standIn.Addr+":22 failed", "a port not allowed")
			}
			for _, tr := range append([]*egresstest.Trap{gw}, traps...) {
				tr.Reset()
			}
		})
	}
}

// TestIntegrationOpenPublicWorkerIsGuarded is the same attack from an
// open_public worker: the task, in the namespace of its netns holder,
// dials the open network's gateway, the metadata address and a public
// address of the host on allowed ports. Unguarded (the control), each is
// reached; guarded, none is, while its service on the attempt network
// still answers.
func TestIntegrationOpenPublicWorkerIsGuarded(t *testing.T) {
	c := requireEngine(t)
	image := egresstest.EgressImage(t, "..")
	traps := hostTraps(t)
	base := baseImage(t)

	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			var gw *egresstest.Trap
			var service string
			var task string
			s := provisionWith(t, "", false, func(spec *WorkerSpec) {
				ctx := testCtx(t)
				openNet := spec.Name + "-open"
				_, err := c.CreateRoutedNetwork(ctx, openNet, spec.Labels, true)
				require.NoError(t, err)
				gw = gatewayTrap(t, c, openNet)
				// The attempt's service: an HTTP server on the open network.
				svc, err := c.raw.ContainerCreate(ctx, &container.Config{Image: base, Labels: spec.Labels,
					Entrypoint: []string{"/bin/busybox", "sh", "-c", "mkdir -p /tmp/w && echo svc-ok >/tmp/w/index.html && exec busybox httpd -f -p 80 -h /tmp/w"}},
					&container.HostConfig{NetworkMode: container.NetworkMode(openNet)}, nil, nil, spec.Name+"-svc")
				require.NoError(t, err)
				require.NoError(t, c.raw.ContainerStart(ctx, svc.ID, container.StartOptions{}))
				inspected, err := c.raw.ContainerInspect(ctx, svc.ID)
				require.NoError(t, err)
				service = inspected.NetworkSettings.Networks[openNet].IPAddress

				start := time.Now()
				held, err := c.StartNetnsHolder(ctx, NetnsHolder{Name: spec.Name + "-netns", Image: image, Network: openNet, Labels: spec.Labels})
				require.NoError(t, err)
				holder, subnet := held.ID, held.Subnet
				assert.True(t, subnet.Contains(netip.MustParseAddr(service)), "%s holds %s", subnet, service)
				assert.Equal(t, gw.Addr, net.JoinHostPort(held.Gateway.String(), "443"))
				if guarded {
					facts := guardFacts(t)
					facts.Local = subnet
					require.NoError(t, c.GuardNetns(ctx, holder, NetGuard{Name: spec.Name + "-guard-netns", Image: image, Labels: spec.Labels,
						Rules: egress.GuardRules(egress.Options{}, facts)}))
				}
				t.Logf("holder started (guarded=%v) in %s", guarded, time.Since(start))
				spec.Network, spec.OpenNetwork, spec.NetnsContainer = openNet, true, holder

				var b strings.Builder
				for _, tr := range append([]*egresstest.Trap{gw}, traps...) {
					h, p, _ := net.SplitHostPort(tr.Addr)
					fmt.Fprintf(&b, "(if echo x | nc -w 3 %s %s >/dev/null 2>&1; then echo '%s reached'; else echo '%s failed'; fi) &\n", h, p, tr.Addr, tr.Addr)
				}
				fmt.Fprintf(&b, "wait\nfor i in 1 2 3 4 5 6 7 8 9 10; do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s 80 | grep svc-ok && break; sleep 0.5; done\necho open-done\n", service)
				task = b.String()
				spec.Entrypoint = []string{"/bin/sh", "-c", task}
			})
			lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, res.Stderr)
			t.Logf("worker: %q (stderr %s)", lines, res.Stderr)
			require.Contains(t, lines, "open-done")
			assert.Contains(t, lines, "svc-ok", "the worker's service on its attempt network")
			for _, tr := range append([]*egresstest.Trap{gw}, traps...) {
				if guarded {
					assert.Contains(t, lines, tr.Addr+" failed")
					assert.Zero(t, tr.Accepted(), "%s was reached", tr.Addr)
				} else {
					assert.Contains(t, lines, tr.Addr+" reached")
					assert.Positive(t, tr.Accepted(), "the control must reach %s", tr.Addr)
				}
				tr.Reset()
			}
		})
	}
}
