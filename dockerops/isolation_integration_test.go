package dockerops

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/kit/ids"
)

// hostListener is a TCP listener of the test process on every host address
// (0.0.0.0 and [::]), recording the first line of every connection.
type hostListener struct {
	l    net.Listener
	port int

	mu    sync.Mutex
	lines []string
}

func listenOnHost(t *testing.T) *hostListener {
	t.Helper()
	l, err := net.Listen("tcp", ":0") // dual stack: 0.0.0.0 and [::]
	require.NoError(t, err)
	h := &hostListener{l: l, port: l.Addr().(*net.TCPAddr).Port}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(conn).ReadString('\n')
				h.mu.Lock()
				h.lines = append(h.lines, strings.TrimSpace(line))
				h.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	return h
}

// received returns the lines that carry token.
func (h *hostListener) received(token string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.Contains(l, token) {
			out = append(out, l)
		}
	}
	return out
}

// hostTargets lists every address of this host as a task would dial it
// from inside a container (link-local ones scoped to the container's eth0),
// and checks from the host itself that the listener answers on each: the
// probe can only pass because of the sandbox, never because the listener
// is deaf.
func hostTargets(t *testing.T, h *hostListener) []string {
	t.Helper()
	ifaces, err := LocalInterfaces()
	require.NoError(t, err)
	var targets []string
	for _, ifc := range ifaces {
		for _, p := range ifc.Addrs {
			a := p.Addr()
			hostSide, sandboxSide := a.String(), a.String()
			if a.IsLinkLocalUnicast() {
				hostSide, sandboxSide = a.WithZone(ifc.Name).String(), a.WithZone("eth0").String()
			}
			targets = append(targets, sandboxSide)
			// Other tests' networks come and go (with their bridges and
			// veths, whose link-local addresses may still be tentative):
			// those addresses are probed but need not answer the host.
			transient := strings.HasPrefix(ifc.Name, "br-") || strings.HasPrefix(ifc.Name, "veth")
			token := "self-" + ids.NewUUID()
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(hostSide, fmt.Sprint(h.port)), 2*time.Second)
			if err != nil && transient {
				t.Logf("transient %s: %v", hostSide, err)
				continue
			}
			require.NoError(t, err, "the host listener must answer on %s", hostSide)
			_, err = fmt.Fprintln(conn, token)
			require.NoError(t, err)
			_ = conn.Close()
			require.Eventually(t, func() bool { return len(h.received(token)) == 1 }, 5*time.Second, 10*time.Millisecond, hostSide)
		}
	}
	require.NotEmpty(t, targets)
	return targets
}

// probeScript makes the task try every target at once, sending token, and
// print REACHED for every connection that succeeded. It also tries a DNS
// name the host itself resolves, and prints the IPv6 switch.
func probeScript(targets []string, port int, token string) string {
	var b strings.Builder
	for _, a := range targets {
		fmt.Fprintf(&b, "(echo '%s %s' | nc -w 3 '%s' %d >/dev/null 2>&1 && echo 'REACHED %s') &\n", token, a, a, port, a)
	}
	b.WriteString("if nslookup deb.debian.org >/dev/null 2>&1; then echo RESOLVED; fi\n")
	b.WriteString("echo ipv6-disabled=$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6)\n")
	b.WriteString("wait\necho probe-done\n")
	return b.String()
}

// TestIntegrationTaskReachesNoHostAddress is the hostile task of issue 10:
// a service listens on every address of the host, and the task, with no
// network and on an isolated attempt network, tries each of them (IPv4 and
// IPv6, the bridge gateways included). A plain internal network, the old
// mechanism, is the control: there the task does reach the host, which
// shows the probe can see a crossing. All of it under runc and gVisor.
func TestIntegrationTaskReachesNoHostAddress(t *testing.T) {
	requireEngine(t)
	h := listenOnHost(t)

	run := func(t *testing.T, s *sandbox) (output []string) {
		t.Helper()
		lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		require.Contains(t, lines, "probe-done", "the probe ran to its end: %q %s", lines, res.Stderr)
		return lines
	}

	// Under runc, and under gVisor: runsc for the network-less worker,
	// runsc-net (gVisor's own network stack, scripts/ensure-runsc.sh) on
	// the networks.
	for _, rt := range []struct{ name, none, network string }{{"runc", "", ""}, {"gvisor", "runsc", "runsc-net"}} {
		t.Run(rt.name, func(t *testing.T) {
			t.Run("network none", func(t *testing.T) {
				targets := hostTargets(t, h)
				token := "none-" + ids.NewUUID()
				s := provision(t, probeScript(targets, h.port, token), func(spec *WorkerSpec) { spec.Runtime, spec.GVisor = rt.none, rt.none != "" })
				lines := run(t, s)
				assert.Empty(t, h.received(token), "the listener heard the task (targets %v)", targets)
				for _, l := range lines {
					assert.NotContains(t, l, "REACHED")
					assert.NotEqual(t, "RESOLVED", l, "a name resolved without any network")
				}
			})

			t.Run("network none without the engine's sandbox", func(t *testing.T) {
				etc, err := requireEngine(t).WithSandboxEtc(filepath.Join(t.TempDir(), "sandbox-etc"))
				require.NoError(t, err)
				targets := hostTargets(t, h)
				token := "nosandbox-" + ids.NewUUID()
				s := provisionOn(t, etc, probeScript(targets, h.port, token), false, func(spec *WorkerSpec) { spec.Runtime, spec.GVisor = rt.none, rt.none != "" })
				inspected, err := s.c.raw.ContainerInspect(testCtx(t), s.container)
				require.NoError(t, err)
				assert.Equal(t, rt.none == "", inspected.Config.NetworkDisabled, "under runc only")
				lines := run(t, s)
				assert.Empty(t, h.received(token), "the listener heard the task (targets %v)", targets)
				for _, l := range lines {
					assert.NotContains(t, l, "REACHED")
					assert.NotEqual(t, "RESOLVED", l, "a name resolved without any network")
				}
			})

			t.Run("isolated network", func(t *testing.T) {
				targets := hostTargets(t, h)
				token := "isolated-" + ids.NewUUID()
				s := provisionWith(t, probeScript(targets, h.port, token), true, func(spec *WorkerSpec) { spec.Runtime, spec.GVisor = rt.network, rt.network != "" })
				host, err := LocalInterfaces()
				require.NoError(t, err)
				require.NoError(t, VerifyHostIsolation(s.network, host))
				inspected, err := s.c.raw.ContainerInspect(testCtx(t), s.container)
				require.NoError(t, err)
				assert.Contains(t, inspected.NetworkSettings.Networks, s.names.Network)

				lines := run(t, s)
				assert.Empty(t, h.received(token), "the listener heard the task (targets %v)", targets)
				for _, l := range lines {
					assert.NotContains(t, l, "REACHED")
					assert.NotEqual(t, "RESOLVED", l, "the embedded DNS forwarded a query out of the sandbox")
				}
				if rt.network == "" {
					assert.Contains(t, lines, "ipv6-disabled=1")
				} else {
					// gVisor's kernel has no such switch (its /proc/sys/net is
					// its own): its network stack has no IPv6 address at all, and
					// the host's IPv6 targets above were not reached.
					assert.Contains(t, lines, "ipv6-disabled=")
				}
			})

			t.Run("control: a plain internal network reaches the host", func(t *testing.T) {
				c := requireEngine(t)
				ctx := testCtx(t)
				name := "forged-test-internal-" + strings.ReplaceAll(ids.NewUUID(), "-", "")[:12]
				created, err := c.raw.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: map[string]string{"dev.forge.test": "true"}})
				require.NoError(t, err)
				t.Cleanup(func() {
					cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					assert.NoError(t, c.raw.NetworkRemove(cleanup, created.ID))
				})
				inspected, err := c.raw.NetworkInspect(ctx, created.ID, network.InspectOptions{})
				require.NoError(t, err)
				require.NotEmpty(t, inspected.IPAM.Config)
				gateway := netip.MustParseAddr(inspected.IPAM.Config[0].Gateway)

				targets := hostTargets(t, h)
				require.Contains(t, targets, gateway.String(), "the internal network's gateway is a host address")
				token := "control-" + ids.NewUUID()
				s := provision(t, probeScript(targets, h.port, token), func(spec *WorkerSpec) {
					spec.Network, spec.Runtime, spec.GVisor = name, rt.network, rt.network != ""
				})
				lines := run(t, s)
				assert.Contains(t, lines, "REACHED "+gateway.String(), "the old mechanism lets the task reach the host through the gateway")
				assert.Contains(t, h.received(token), token+" "+gateway.String())
			})
		})
	}
}
