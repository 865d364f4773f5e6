package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/testkit/egresstest"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// newEgressE2E is an e2e whose runner runs the egress proxy, joined to a
// stand-in for the internet on which www.test is the operator-mapped
// server, under the isolation floor given ("": runc).
func newEgressE2E(t *testing.T, floor string) (*e2e, egresstest.StandIn) {
	t.Helper()
	catalogue, _ := serviceCatalogue(t)
	egresstest.EgressImage(t, filepath.Join("..", "..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	require.NoError(t, err)
	defer docker.Close()
	_, err = example.BuildBaseImage(ctx, docker, "/bin/busybox")
	require.NoError(t, err)
	standIn := egresstest.Start(t, enginetest.Client(t), example.BaseImage)
	e := newE2E(t, runner.Config{Services: catalogue, Isolation: floor, Egress: egress.Options{
		Enabled:   true,
		Hosts:     []egress.Mapping{{Name: "www.test", Addr: netip.MustParseAddr(standIn.Addr)}},
		Upstreams: []string{standIn.Network},
	}})
	return e, standIn
}

func (e *e2e) egressDispatch(argv []string, hosts ...string) *messages.Dispatch {
	d := e.dispatch(argv, 256<<20)
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: hosts}
	d.Sandbox.RequestedResources.RuntimeOverheadBytes = 384 << 20
	return d
}

// egressRequests are the attempt's sandbox_egress_request events as
// "decision host:port".
func egressRequests(t *testing.T, log *runner.Log) []string {
	t.Helper()
	var out []string
	for _, ev := range log.Events() {
		if ev.EventType != "sandbox_egress_request" || ev.Data == nil {
			continue
		}
		var r struct {
			Host     string `json:"host"`
			Port     int    `json:"port"`
			Decision string `json:"decision"`
			Bytes    int64  `json:"bytes"`
		}
		require.NoError(t, json.Unmarshal([]byte(*ev.Data), &r))
		out = append(out, fmt.Sprintf("%s %s:%d", r.Decision, r.Host, r.Port))
	}
	return out
}

// TestEgressEndToEndTaskReachesOnlyTheAllowlist runs a public_allowlist
// attempt whose task reaches the allowlisted name through the proxy, is
// refused another name and port 22, cannot reach the stand-in directly and
// resolves nothing; the events list what it tried. It runs under the runc
// and the gvisor floors (the worker under runsc-net: gVisor's network
// stack, the proxy by its /etc/hosts name).
func TestEgressEndToEndTaskReachesOnlyTheAllowlist(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); egressAllowlist(t, iso.floor, iso.networkRuntime) })
	}
}

func egressAllowlist(t *testing.T, floor, runtime string) {
	e, standIn := newEgressE2E(t, floor)
	script := strings.Join([]string{
		`set -u`,
		// The proxy named by HTTPS_PROXY; nc takes "host port". The
		// request's sender holds its side open a moment: squid drops a
		// half-closed client's request.
		`ask() { hp=${HTTPS_PROXY#http://}; (printf "$1"; sleep 2) | nc -w 5 "${hp%:*}" "${hp##*:}" 2>/dev/null | tr -d '\r'; }`,
		`ask 'CONNECT www.test:443 HTTP/1.1\r\nHost: www.test:443\r\n\r\nGET / HTTP/1.0\r\nHost: www.test\r\n\r\n' | grep -q ` + egresstest.Page + ` || { echo "tunnel failed"; exit 3; }`,
		`ask 'CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n' | head -n 1 | grep -q '^HTTP/1.1 403' || { echo "unlisted not refused"; exit 4; }`,
		`ask 'CONNECT www.test:22 HTTP/1.1\r\nHost: www.test:22\r\n\r\n' | head -n 1 | grep -q '^HTTP/1.1 403' || { echo "port 22 not refused"; exit 5; }`,
		`if echo x | nc -w 3 ` + standIn.Addr + ` 443 >/dev/null 2>&1; then echo "direct reached"; exit 6; fi`,
		`if nslookup www.test >/dev/null 2>&1; then echo "resolved"; exit 7; fi`,
		`echo egress-task-done`,
	}, "\n")
	// The task checks its kernel after the probes, then sleeps so the test
	// inspects its container while it runs.
	script += "\n(dmesg 2>&1 | head -n 1) > kernel.txt\nsleep 3\n"
	d := e.egressDispatch([]string{"/bin/sh", "-c", script}, "www.test", "*.pypi.org")
	log := e.submit(d)
	waitForEvent(t, log, "task_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if info, err := e.engine.ContainerInspect(ctx, names.Container); err == nil {
		assert.Equal(t, runtime, info.HostConfig.Runtime, "the worker's runtime")
	} else {
		t.Errorf("the worker was not inspected while it ran: %v", err)
	}
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s %s; requests %v; events %v", out.Code, out.Message, egressRequests(t, log), eventSummary(log))
	requests := egressRequests(t, log)
	assert.Contains(t, requests, "allowed www.test:443")
	assert.Contains(t, requests, "denied other.test:443")
	assert.Contains(t, requests, "denied www.test:22")
	var started map[string]any
	for _, ev := range log.Events() {
		if ev.EventType == "sandbox_started" {
			require.NoError(t, json.Unmarshal([]byte(*ev.Data), &started))
		}
	}
	raw, _ := json.Marshal(started)
	assert.Contains(t, string(raw), `"role":"egress_proxy"`)
	assert.Contains(t, string(raw), `"role":"egress"`)
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
	// The memory sampler watched the proxy too.
	require.NotNil(t, out.Telemetry)
	var roles []string
	for _, c := range out.Telemetry.Containers {
		roles = append(roles, c.Role)
		if c.Role == "egress_proxy" {
			assert.Positive(t, c.PeakMemoryBytes, "the proxy's peak memory")
		}
	}
	assert.Contains(t, roles, "egress_proxy")
	if floor == messages.IsolationGVisor {
		assert.Contains(t, e.git("show", example.Branch+":kernel.txt"), "Starting gVisor", "the task ran on gVisor's kernel")
	}
}

func TestEgressEndToEndProxyKilledMidRunFailsTheAttempt(t *testing.T) {
	e, _ := newEgressE2E(t, "")
	d := e.egressDispatch([]string{"/bin/sh", "-c", "sleep 120"}, "www.test")
	log := e.submit(d)
	waitForEvent(t, log, "worker_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.engine.ContainerKill(ctx, names.Prefix+"-egress", "KILL"))
	out := e.wait(log)
	assert.Equal(t, string(failure.SandboxEgressFailed), out.Code, out.Message)
	assert.Contains(t, out.Message, "while the worker ran")
	assert.Equal(t, messages.PhaseRunning, out.Phase)
}

// TestOpenPublicEndToEndRunsOnlyWhenTheOperatorAllowsIt: refused by
// default with policy_mismatch; allowed, the task runs on a routed
// network (it has a default route, which no isolated network gives) and
// nothing labelled is left.
func TestOpenPublicEndToEndRunsOnlyWhenTheOperatorAllowsIt(t *testing.T) {
	script := `awk '$2 == "00000000" { found = 1 } END { exit !found }' /proc/net/route || { echo "no default route"; exit 3; }`
	t.Run("refused by default", func(t *testing.T) {
		e := newE2E(t, runner.Config{})
		d := e.dispatch([]string{"/bin/sh", "-c", script}, 256<<20)
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
		out := e.wait(e.submit(d))
		assert.Equal(t, string(failure.PolicyMismatch), out.Code, out.Message)
	})
	t.Run("allowed", func(t *testing.T) {
		catalogue, _ := serviceCatalogue(t) // the netns guard runs from the egress image
		egresstest.EgressImage(t, filepath.Join("..", "..", ".."))
		e := newE2E(t, runner.Config{AllowOpenPublic: true, Services: catalogue})
		d := e.dispatch([]string{"/bin/sh", "-c", script}, 256<<20)
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
		log := e.submit(d)
		out := e.wait(log)
		require.Equal(t, messages.StatusSucceeded, out.Status, "%s %s; events %v", out.Code, out.Message, eventSummary(log))
		started := waitForEvent(t, log, "sandbox_started")
		assert.Contains(t, *started.Data, `"role":"open"`)
	})
}

// noGuard is the control of the open_public guard test: the netns guard
// never loads, as before the guard existed.
type noGuard struct{ actors.Docker }

func (noGuard) GuardNetns(context.Context, string, dockerops.NetGuard) error { return nil }

// TestOpenPublicEndToEndTaskReachesNoHostOrMetadataAddress is the hostile
// open_public task of issue 28: it dials its network's gateway (the host),
// the metadata address and a public address of the host, all on a port
// the operator allows. Stand-ins on this host (egresstest) listen on every
// address. Unguarded (the control) the task reaches each; guarded it
// reaches none and nothing is accepted.
func TestOpenPublicEndToEndTaskReachesNoHostOrMetadataAddress(t *testing.T) {
	catalogue, _ := serviceCatalogue(t)
	egresstest.EgressImage(t, filepath.Join("..", "..", ".."))
	targets := egresstest.AddHostAddresses(t)
	trap := egresstest.Listen(t, ":0")
	_, port, err := net.SplitHostPort(trap.Addr)
	require.NoError(t, err)
	p, err := egress.ParsePort(port)
	require.NoError(t, err)
	script := `gw=$(ip route | awk '$1 == "default" { print $3 }')
[ -n "$gw" ] || { echo "no default route"; exit 3; }
for a in gateway:$gw ` + strings.Join(targets, " ") + `; do
  name=${a%%:*}; addr=${a#*:}
  if echo x | nc -w 3 "$addr" ` + port + ` >/dev/null 2>&1; then echo "$name reached"; else echo "$name failed"; fi
done >open.txt
`
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			cfg := runner.Config{AllowOpenPublic: true, Services: catalogue, Egress: egress.Options{Ports: []int{p}}}
			if !guarded {
				cfg.WrapDocker = func(d actors.Docker) actors.Docker { return noGuard{d} }
			}
			e := newE2E(t, cfg)
			d := e.dispatch([]string{"/bin/sh", "-c", script}, 256<<20)
			d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
			out := e.wait(e.submit(d))
			require.Equal(t, messages.StatusSucceeded, out.Status, "%s %s", out.Code, out.Message)
			got := e.git("show", example.Branch+":open.txt")
			t.Logf("task (guarded=%v):\n%s\naccepted %d", guarded, got, trap.Accepted())
			names := append([]string{"gateway"}, targets...)
			for _, n := range names {
				if guarded {
					assert.Contains(t, got, n+" failed")
				} else {
					assert.Contains(t, got, n+" reached")
				}
			}
			if guarded {
				assert.Zero(t, trap.Accepted(), "nothing reached the host")
			} else {
				assert.EqualValues(t, len(names), trap.Accepted(), "the control reaches every stand-in")
			}
			trap.Reset()
		})
	}
}
