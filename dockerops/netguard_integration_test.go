package dockerops

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/testkit/egresstest"
)

// The stand-ins of the netns guard's tests, all on this host: the cloud
// metadata address and a public address of the host, both on a bridge
// interface the test creates (so that what is sent to them stays here),
// and the attempt's bridge gateway. Each has a listener that counts what
// reaches it.
const (
	trapMetadata = "169.254.169.254"
	// trapPublic lies outside every range the guard treats as private:
	// only the host-address deny stops it.
	trapPublic = "100.128.255.254"
)

// trap is a listener on one host address and port, counting connections.
type trap struct {
	addr     string
	accepted atomic.Int32
}

func listenTrap(t *testing.T, addr string) *trap {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	tr := &trap{addr: addr}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			tr.accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return tr
}

// hostTraps puts the metadata address and the public stand-in on a bridge
// interface of their own, checks that the host now delivers both locally
// (nothing sent to them can leave the machine), and listens on ports 80
// and 443 of each. The interface goes at the test's cleanup.
func hostTraps(t *testing.T) []*trap {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but the netns guard tests need root (they add host addresses)")
		}
		t.Skip("the netns guard tests need root (they add host addresses)")
	}
	name := "fgtrap" + ids.NewUUID()[:6]
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	ip("link", "add", name, "type", "bridge")
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			t.Errorf("remove %s: %v %s", name, err, out)
		}
	})
	for _, a := range []string{trapMetadata, trapPublic} {
		ip("addr", "add", a+"/32", "dev", name)
	}
	ip("link", "set", name, "up")
	var traps []*trap
	for _, a := range []string{trapMetadata, trapPublic} {
		out, err := exec.Command("ip", "route", "get", a).CombinedOutput()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(out), "local "), "%s must be delivered locally: %s", a, out)
		for _, p := range []string{"80", "443"} {
			traps = append(traps, listenTrap(t, net.JoinHostPort(a, p)))
		}
	}
	return traps
}

// gatewayTrap listens on port 443 of network's gateway on this host.
func gatewayTrap(t *testing.T, c *Client, name string) *trap {
	t.Helper()
	nw, err := c.raw.NetworkInspect(testCtx(t), name, network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, nw.IPAM.Config)
	gw := nw.IPAM.Config[0].Gateway
	require.NotEmpty(t, gw, "network %s has no gateway", name)
	return listenTrap(t, net.JoinHostPort(gw, "443"))
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

			targets := []string{gw.addr}
			for _, tr := range traps {
				targets = append(targets, tr.addr)
			}
			for i, tg := range targets {
				h, p, _ := net.SplitHostPort(tg)
				targets[i] = h + " " + p
			}
			allowed := standIn.Addr + " 443"
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
			for _, tr := range append([]*trap{gw}, traps...) {
				if guarded {
					assert.Contains(t, out, tr.addr+" failed")
					assert.Zero(t, tr.accepted.Load(), "%s was reached", tr.addr)
				} else {
					assert.Contains(t, out, tr.addr+" reached")
					assert.Positive(t, tr.accepted.Load(), "the control must reach %s", tr.addr)
				}
			}
			if guarded {
				assert.Contains(t, out, standIn.Addr+":22 failed", "a port not allowed")
			}
			for _, tr := range append([]*trap{gw}, traps...) {
				tr.accepted.Store(0)
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
			var gw *trap
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
				holder, subnet, err := c.StartNetnsHolder(ctx, NetnsHolder{Name: spec.Name + "-netns", Image: image, Network: openNet, Labels: spec.Labels})
				require.NoError(t, err)
				assert.True(t, subnet.Contains(netip.MustParseAddr(service)), "%s holds %s", subnet, service)
				if guarded {
					facts := guardFacts(t)
					facts.Local = subnet
					require.NoError(t, c.GuardNetns(ctx, holder, NetGuard{Name: spec.Name + "-guard-netns", Image: image, Labels: spec.Labels,
						Rules: egress.GuardRules(egress.Options{}, facts)}))
				}
				t.Logf("holder started (guarded=%v) in %s", guarded, time.Since(start))
				spec.Network, spec.OpenNetwork, spec.NetnsContainer = openNet, true, holder

				var b strings.Builder
				for _, tr := range append([]*trap{gw}, traps...) {
					h, p, _ := net.SplitHostPort(tr.addr)
					fmt.Fprintf(&b, "(if echo x | nc -w 3 %s %s >/dev/null 2>&1; then echo '%s reached'; else echo '%s failed'; fi) &\n", h, p, tr.addr, tr.addr)
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
			for _, tr := range append([]*trap{gw}, traps...) {
				if guarded {
					assert.Contains(t, lines, tr.addr+" failed")
					assert.Zero(t, tr.accepted.Load(), "%s was reached", tr.addr)
				} else {
					assert.Contains(t, lines, tr.addr+" reached")
					assert.Positive(t, tr.accepted.Load(), "the control must reach %s", tr.addr)
				}
				tr.accepted.Store(0)
			}
		})
	}
}
