package actors

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// egressHarness is a harness whose runner runs the egress proxy from a
// catalogue whose image the fake engine holds with the pinned id.
func egressHarness(t *testing.T, host *fakeHost, clk clock.Clock) *harness {
	host.catalogueID = pinnedID
	h := newHarness(t, host, clk)
	c, err := services.Parse(strings.NewReader("egress\tforged-services/egress:t\t" + pinnedID + "\n"))
	require.NoError(t, err)
	h.cfg.Services = c
	h.cfg.Egress = egress.Options{Enabled: true, Ports: []int{443, 8443},
		Hosts: []egress.Mapping{{Name: "www.test", Addr: netip.MustParseAddr("172.30.0.9")}}, Upstreams: []string{"upstream-net"}}
	return h
}

func egressDispatch(hosts ...string) *messages.Dispatch {
	d := testDispatch(time.Now().Add(time.Hour))
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: hosts}
	d.Sandbox.RequestedResources.RuntimeOverheadBytes = 384 << 20
	return d
}

func TestEgressProxyStartsBeforeTheWorkerAndItsLogBecomesEvents(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.egressLog = []string{
		"forge1 1764730000 CONNECT www.test 443 200 TCP_TUNNEL 5120",
		"forge1 1764730001 CONNECT other.test 443 403 TCP_DENIED 3890",
		"squid diagnostics are not records",
		"forge1 1764730002 CONNECT www.test 22 403 TCP_DENIED 3890",
	}
	h := egressHarness(t, host, nil)
	probe := h.submit(t, egressDispatch("www.test", "*.pypi.org"))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)

	assert.Less(t, host.index("network"), host.index("egress"))
	assert.Less(t, host.index("routed"), host.index("egress"))
	assert.Less(t, host.index("probe"), host.index("create"), "the worker waits for the proxy's readiness")
	host.mu.Lock()
	require.Len(t, sidecarsOf[dockerops.EgressSpec](host), 1)
	spec := sidecarsOf[dockerops.EgressSpec](host)[0]
	worker := host.workerSpec()
	host.mu.Unlock()

	// The proxy: pinned image, both networks plus the operator's upstream,
	// never root, the generated configuration.
	assert.Equal(t, pinnedID, spec.Image)
	assert.Equal(t, worker.Network, spec.AttemptNetwork)
	assert.Equal(t, worker.Network+"-egress", spec.EgressNetwork)
	host.mu.Lock()
	assert.Equal(t, []string{spec.EgressNetwork + "/shared=false"}, host.routed, "the proxy is alone on its egress network")
	host.mu.Unlock()
	assert.Equal(t, []string{"upstream-net"}, spec.Upstreams)
	assert.Equal(t, egress.Alias, spec.Alias)
	assert.Equal(t, 13, spec.UID)
	assert.Equal(t, int64(egressProxyMemory), spec.MemoryBytes)
	assert.Contains(t, spec.Config, "acl forge_allowed dstdomain -n .pypi.org www.test\n")
	assert.Contains(t, spec.Config, "acl forge_ports port 443 8443\n")
	assert.Equal(t, "172.30.0.9 www.test\n", spec.Hosts)
	// Its guard: from the pinned image, the rules of the operator's
	// options and the host's facts (no local subnet for the proxy).
	assert.Equal(t, pinnedID, spec.Guard.Image)
	assert.Contains(t, spec.Guard.Rules, "ip daddr { 172.30.0.9 } tcp dport { 443, 8443 } accept")
	assert.Contains(t, spec.Guard.Rules, "169.254.0.0/16")
	assert.NotContains(t, spec.Guard.Rules, "meta l4proto tcp accept")

	// The worker: on the isolated network only, with the proxy variables.
	assert.False(t, worker.OpenNetwork)
	for _, v := range []string{"HTTP_PROXY=http://egress:3128", "HTTPS_PROXY=http://egress:3128", "ALL_PROXY=http://egress:3128", "all_proxy=http://egress:3128", "NO_PROXY=localhost,127.0.0.1,::1",
		"http_proxy=http://egress:3128", "https_proxy=http://egress:3128", "no_proxy=localhost,127.0.0.1,::1"} {
		assert.Contains(t, worker.Env, v)
	}

	// Events: the requests, allowed and denied, and the unreadable line.
	var requests []map[string]any
	var truncated bool
	for _, ev := range actortest.All[messages.AttemptEvent](probe) {
		switch ev.Event.EventType {
		case "sandbox_egress_request":
			var data map[string]any
			require.NoError(t, json.Unmarshal([]byte(*ev.Event.Data), &data))
			requests = append(requests, data)
		case "sandbox_egress_log_truncated":
			truncated = true
		}
	}
	require.Len(t, requests, 3)
	assert.Equal(t, "www.test", requests[0]["host"])
	assert.Equal(t, "allowed", requests[0]["decision"])
	assert.Equal(t, float64(5120), requests[0]["bytes"])
	assert.Equal(t, "other.test", requests[1]["host"])
	assert.Equal(t, "denied", requests[1]["decision"])
	assert.Equal(t, float64(22), requests[2]["port"])
	assert.True(t, truncated, "the unreadable line is counted")
	assert.Contains(t, eventTypes(probe), "sandbox_egress_ready")
	assert.Equal(t, 1, host.teardowns)
	assert.Contains(t, host.stopped, "svc-egress", "the proxy is stopped so that its log ends")
}

func TestEgressLedgerPlansAndRecordsTheProxyAndItsNetwork(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := egressHarness(t, host, nil)
	d := egressDispatch("www.test")
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	var e ledger.Entry
	require.Eventually(t, func() bool {
		var err error
		e, err = ledger.Store{Root: h.state}.Read(d.AttemptID())
		return err == nil && e.State == ledger.Active && len(e.Created) >= 7
	}, within, 10*time.Millisecond)
	created := map[string]string{}
	for _, r := range e.Created {
		created[r.Role] = r.ID
	}
	assert.Equal(t, "svc-egress", created[roleEgressProxy])
	assert.NotEmpty(t, created["egress"])
	assert.NotEmpty(t, created["internal"])

	// inspect shows the proxy actor.
	var found *messages.InspectReply
	queue := []*actor.PID{h.root}
	for len(queue) > 0 && found == nil {
		pid := queue[0]
		queue = queue[1:]
		res, err := h.system.Root.RequestFuture(pid, messages.Inspect{}, within).Result()
		require.NoError(t, err, pid.GetId())
		reply := res.(messages.InspectReply)
		if reply.Kind == kindEgress {
			found = &reply
		}
		for _, child := range reply.Children {
			queue = append(queue, actor.NewPID(h.system.Address(), child))
		}
	}
	require.NotNil(t, found, "no egress actor in the tree")
	assert.Equal(t, "ready", found.Phase)
	assert.Equal(t, "healthy", found.Facts["health"])
	assert.Equal(t, "svc-egress", found.Facts["containerId"])

	h.cancel(t, d)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
}

func TestEgressProxyDyingMidRunFailsTheAttempt(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	kill := make(chan struct{})
	host.killService = map[string]chan struct{}{"egress": kill}
	h := egressHarness(t, host, nil)
	probe := h.submit(t, egressDispatch("www.test"))
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	close(kill)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxEgressFailed), out.Code)
	assert.Contains(t, out.Message, "the egress proxy exited with code 137 while the worker ran")
	assert.Equal(t, messages.PhaseRunning, out.Phase)
	assert.Equal(t, 1, host.called("egress"), "the proxy is never restarted")
	assert.Equal(t, 1, host.teardowns)
}

func TestEgressProxyFailingItsProbeNeverStartsTheWorker(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.probeCode = map[string]int{services.Egress: 1}
	h := egressHarness(t, host, nil)
	out := h.run(t, egressDispatch("www.test"))
	assert.Equal(t, string(failure.SandboxEgressFailed), out.Code)
	assert.Contains(t, out.Message, "readiness probe")
	assert.Zero(t, host.called("create"))
	assert.Equal(t, 1, host.teardowns)
}

func TestNetworkPolicyRefusalsComeBeforeAnythingExists(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(*harness)
		dispatch  func() *messages.Dispatch
		code      failure.Code
	}{
		{"egress off", func(h *harness) { h.cfg.Egress.Enabled = false }, func() *messages.Dispatch { return egressDispatch("www.test") }, failure.SandboxEgressUnsupported},
		{"no egress image", func(h *harness) { h.cfg.Services = nil }, func() *messages.Dispatch { return egressDispatch("www.test") }, failure.SandboxEgressUnsupported},
		{"IP literal", nil, func() *messages.Dispatch { return egressDispatch("www.test", "10.0.0.1") }, failure.SandboxEgressPolicyInvalid},
		{"proxy memory not reserved", nil, func() *messages.Dispatch {
			d := egressDispatch("www.test")
			d.Sandbox.RequestedResources.RuntimeOverheadBytes = 128 << 20
			return d
		}, failure.SandboxCapacityProfile},
		{"open_public not allowed", nil, func() *messages.Dispatch {
			d := testDispatch(time.Now().Add(time.Hour))
			d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
			return d
		}, failure.PolicyMismatch},
		{"open_public under sandbox_required", func(h *harness) { h.cfg.AllowOpenPublic = true }, func() *messages.Dispatch {
			d := testDispatch(time.Now().Add(time.Hour))
			d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
			d.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
			return d
		}, failure.PolicyMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			h := egressHarness(t, host, nil)
			if tc.configure != nil {
				tc.configure(h)
			}
			out := h.run(t, tc.dispatch())
			assert.Equal(t, string(tc.code), out.Code, out.Message)
			assert.Zero(t, host.called("volume"), "nothing was created")
			assert.Zero(t, host.called("egress"))
		})
	}
}

func TestOpenPublicRunsOnARoutedNetworkWhenTheOperatorAllowsIt(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := egressHarness(t, host, nil) // the netns guard runs from the egress image
	h.cfg.AllowOpenPublic = true
	d := testDispatch(time.Now().Add(time.Hour))
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
	out := h.run(t, d)
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Zero(t, host.called("network"), "no isolated network")
	assert.Less(t, host.index("routed"), host.index("netns-holder"))
	assert.Less(t, host.index("guard"), host.index("create"), "the namespace is guarded before the worker exists")
	host.mu.Lock()
	defer host.mu.Unlock()
	assert.True(t, host.workerSpec().OpenNetwork)
	require.Len(t, host.routed, 1)
	assert.Equal(t, host.workerSpec().Network+"/shared=true", host.routed[0], "the worker and its services share the open network")
	assert.Empty(t, sidecarsOf[dockerops.EgressSpec](host), "no proxy")
	for _, v := range host.workerSpec().Env {
		assert.NotContains(t, v, "PROXY")
	}
	// The worker joins the holder's namespace, guarded before the worker
	// exists, with its services' subnet open.
	holder := host.workerSpec().NetnsContainer
	require.NotEmpty(t, holder)
	assert.Contains(t, host.guards[holder], "ip daddr 172.30.0.0/16 meta l4proto tcp accept")
	rules := host.guards[holder]
	assert.Less(t, strings.Index(rules, "172.30.0.1"), strings.Index(rules, "ip daddr 172.30.0.0/16"), "its gateway is the host: denied before the subnet is admitted")
	assert.Contains(t, host.guards[holder], "169.254.0.0/16")
}

func TestOpenPublicNeedsTheEgressImageForItsGuard(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := newHarness(t, host, nil)
	h.cfg.AllowOpenPublic = true
	d := testDispatch(time.Now().Add(time.Hour))
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
	out := h.run(t, d)
	assert.Equal(t, string(failure.SandboxEgressUnsupported), out.Code, out.Message)
	assert.Zero(t, host.called("create"), "no unguarded worker")
}

func TestEgressActorIsNeverRestarted(t *testing.T) {
	assert.Equal(t, ChildSpec{}, ChildSpecFor(kindEgress))
}

func TestOpenPublicServicesShareTheWorkersGuard(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	c, err := services.Parse(strings.NewReader("postgres\tforged-services/postgres:t\t" + pinnedID + "\n" +
		"redis\tforged-services/redis:t\t" + pinnedID + "\n" + "egress\tforged-services/egress:t\t" + pinnedID + "\n"))
	require.NoError(t, err)
	h.cfg.Services = c
	h.cfg.AllowOpenPublic = true
	d := serviceDispatch()
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
	out := h.run(t, d)
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	assert.Less(t, host.index("guard"), host.index("service:postgres"), "the holder is guarded before the services start")
	host.mu.Lock()
	defer host.mu.Unlock()
	holderRules := host.guards[host.workerSpec().NetnsContainer]
	require.NotEmpty(t, holderRules)
	specs := sidecarsOf[dockerops.ServiceSpec](host)
	require.Len(t, specs, 2)
	for _, spec := range specs {
		require.NotNil(t, spec.Guard, spec.Alias)
		assert.Equal(t, holderRules, spec.Guard.Rules, spec.Alias)
		assert.Equal(t, pinnedID, spec.Guard.Image)
	}
}
