package actors

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/forgedev/forged/supervisor"
)

// adoptableWithServices is an adoptable attempt whose contract declares
// postgres and redis, and whose ledger recorded the attempt network and
// both service containers (svc-postgres, svc-redis: the fake engine's ids).
func adoptableWithServices(t *testing.T) (root string, hostKey []byte, e ledger.Entry) {
	t.Helper()
	root, hostKey, e = adoptableWith(t, servicesYML, nil)
	names, err := dockerops.NamesFor(e.AttemptID)
	require.NoError(t, err)
	e.Adoption.Network = names.Network
	e.Created = append(e.Created,
		ledger.Resource{Type: ledger.ResourceNetwork, Name: names.Network, ID: "net-1", Role: "internal"},
		ledger.Resource{Type: ledger.ResourceContainer, Name: services.ContainerName(names.Prefix, "postgres"), ID: "svc-postgres", Role: "service:postgres"},
		ledger.Resource{Type: ledger.ResourceContainer, Name: services.ContainerName(names.Prefix, "redis"), ID: "svc-redis", Role: "service:redis"})
	require.NoError(t, ledger.Store{Root: root}.Write(e))
	return root, hostKey, e
}

// readoptWithServices re-adopts the attempt of adoptableWithServices on
// host (whose worker stays attached until the attempt stops it) and
// returns the probe of its events once it emitted sandbox_readopted.
func readoptWithServices(t *testing.T, host *fakeHost) (*actortest.Probe, string, ledger.Entry) {
	t.Helper()
	root, hostKey, e := adoptableWithServices(t)
	ad, err := LoadAdoption(root, e, hostKey)
	require.NoError(t, err)
	return readoptOn(t, host, ad, root, hostKey, testCatalogue(t), egress.Options{}), root, e
}

// readoptOn re-adopts ad on host (whose worker stays attached until the
// attempt stops it) and returns the probe of its events once it emitted
// sandbox_readopted.
func readoptOn(t *testing.T, host *fakeHost, ad *Adopted, root string, hostKey []byte, catalogue *services.Catalogue, opts egress.Options) *actortest.Probe {
	t.Helper()
	var log [][]byte // the three events delivered before the restart
	for i := range 3 {
		line, err := messages.SignEventLine(messages.EventKey("the-control-key"), uint64(i), messages.RunnerEvent("task_output", "line", nil))
		require.NoError(t, err)
		log = append(log, line)
	}
	adopt := &adoptHost{fakeHost: host, log: bytes.Join(log, nil), attached: make(chan struct{})}
	clk := clock.NewManual(time.Now())
	sys := actortest.NewSystem(t, actortest.WithClock(clk))
	probe := sys.NewProbe()
	cfg := AttemptConfig{StateRoot: root, HostKey: hostKey, WorkerBinary: "/proc/self/exe", WorkerDigest: "d", Clock: clk,
		SampleInterval: time.Hour, Confinement: host.confinementFacts, Services: catalogue, Egress: opts}
	sys.Spawn(supervisor.Props(supervisor.Config{
		Slots: 4, QueueLimit: 4, Cleaner: host, Ledgers: ledger.Store{Root: root},
		Adopt: func(*actor.ActorSystem) []supervisor.Adoption {
			return []supervisor.Adoption{{Dispatch: ad.Dispatch, Subscriber: probe.PID(), NewAttempt: func(sub, sup *actor.PID) *actor.Props {
				return AdoptedAttemptProps(ad, sub, sup, cfg, Deps{Git: adopt, Docker: adopt})
			}}}
		},
	}))
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_readopted" })
	return probe
}

func runningServices() map[string]dockerops.ContainerState {
	return map[string]dockerops.ContainerState{
		"svc-postgres": {Running: true, Status: "running"},
		"svc-redis":    {Running: true, Status: "running"},
	}
}

// TestReadoptedServicesAreProbedAgainNotRecreated: the re-adopted
// attempt finds both service containers by the ledger's ids, probes each
// again with the probe of the start (on the recorded network, with the
// service's own secrets volume), creates nothing, keeps them in its
// ledger and samples them.
func TestReadoptedServicesAreProbedAgainNotRecreated(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.states = runningServices()
	probe, root, e := readoptWithServices(t, host)
	ready := map[string]bool{}
	for range 2 {
		m := actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_service_ready" })
		var data map[string]string
		require.NoError(t, json.Unmarshal([]byte(*m.Event.Data), &data))
		ready[data["service"]] = true
		assert.Equal(t, "svc-"+data["service"], data["containerId"])
	}
	assert.Equal(t, map[string]bool{"postgres": true, "redis": true}, ready)

	names, err := dockerops.NamesFor(e.AttemptID)
	require.NoError(t, err)
	host.mu.Lock()
	probes := append([]dockerops.ProbeSpec(nil), host.probes...)
	host.mu.Unlock()
	require.Len(t, probes, 2)
	for _, p := range probes {
		assert.Equal(t, names.Network, p.Network)
		assert.Equal(t, e.Adoption.Image, p.Image, "the probe runs the worker's image")
		assert.Equal(t, services.SecretsVolumeName(names.Prefix, p.Cmd[4]), p.SecretsVolume)
		assert.Equal(t, services.ProbeName(names.Prefix, p.Cmd[4]), p.Name)
	}
	assert.Zero(t, host.called("service:postgres")+host.called("service:redis"), "a service is never re-created")
	assert.Zero(t, host.called("create"), "the worker is not re-created")

	// The new process's ledger still records the network and the services.
	require.Eventually(t, func() bool {
		got, err := ledger.Store{Root: root}.Read(e.AttemptID)
		if err != nil {
			return false
		}
		ids := map[string]string{}
		for _, r := range got.Created {
			ids[r.Role] = r.ID
		}
		return ids["internal"] == "net-1" && ids["service:postgres"] == "svc-postgres" && ids["service:redis"] == "svc-redis" &&
			hasRole(got.Created, "secrets:postgres") && hasRole(got.Created, "secrets:redis")
	}, within, 10*time.Millisecond, "the re-adopted attempt's ledger lost its services")
}

func hasRole(rs []ledger.Resource, role string) bool {
	for _, r := range rs {
		if r.Role == role {
			return true
		}
	}
	return false
}

// TestReadoptedServiceFoundBrokenEndsTheAttempt: a service removed or
// stopped while forged was away, or one that fails its probe again, ends
// the re-adopted attempt with the code the same failure has at start, a
// message that says it was found so on re-adoption, and a teardown.
func TestReadoptedServiceFoundBrokenEndsTheAttempt(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *fakeHost)
		code  failure.Code
		msg   string
	}{
		{"removed", func(h *fakeHost) { h.states["svc-redis"] = dockerops.ContainerState{Status: "removed"} },
			failure.SandboxServiceFailed, "service redis was removed while forged was away"},
		{"stopped", func(h *fakeHost) {
			h.states["svc-postgres"] = dockerops.ContainerState{Status: "exited", ExitCode: 137, OOMKilled: true}
		},
			failure.SandboxServiceFailed, "service postgres was killed for exceeding its memory limit while forged was away"},
		{"exited", func(h *fakeHost) { h.states["svc-redis"] = dockerops.ContainerState{Status: "exited", ExitCode: 1} },
			failure.SandboxServiceFailed, "service redis exited with code 1 while forged was away"},
		{"fails its probe", func(h *fakeHost) { h.probeCode = map[string]int{"redis": 1} },
			failure.SandboxServiceHealthTimeout, "service redis did not pass its readiness probe again on re-adoption"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			host.states = runningServices()
			c.setup(host)
			probe, _, _ := readoptWithServices(t, host)
			out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
			assert.Equal(t, string(c.code), out.Code, out.Message)
			assert.Contains(t, out.Message, c.msg)
			assert.Equal(t, messages.PhaseRunning, out.Phase)
			assert.Equal(t, 1, host.teardowns)
			assert.Zero(t, host.called("service:postgres")+host.called("service:redis"), "a service is never re-created")
		})
	}
}

// TestReadoptedServiceDyingLaterFailsTheAttempt: a re-attached service is
// watched as at start: it stopping while the worker runs ends the attempt.
func TestReadoptedServiceDyingLaterFailsTheAttempt(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.states = runningServices()
	kill := make(chan struct{})
	host.killService = map[string]chan struct{}{"postgres": kill}
	probe, _, _ := readoptWithServices(t, host)
	for range 2 {
		actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_service_ready" })
	}
	close(kill)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxServiceFailed), out.Code)
	assert.Contains(t, out.Message, "service postgres exited with code 137 while the worker ran")
}

// TestLoadAdoptionRefusesServicesWithoutTheirContainers: a ledger whose
// contract declares services but that records no container of one (or no
// attempt network) is damaged: the attempt is reaped, never adopted with
// a service missing.
func TestLoadAdoptionRefusesServicesWithoutTheirContainers(t *testing.T) {
	for _, drop := range []string{"internal", "service:redis"} {
		t.Run(drop, func(t *testing.T) {
			root, key, e := adoptableWithServices(t)
			var kept []ledger.Resource
			for _, r := range e.Created {
				if r.Role != drop {
					kept = append(kept, r)
				}
			}
			e.Created = kept
			_, err := LoadAdoption(root, e, key)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxReadoptLedgerDamaged, failure.CodeOf(err))
		})
	}
}

// TestReadoptedEgressProxyReportsOnlyWhatWasNotDelivered: a
// public_allowlist attempt is re-adopted with its egress proxy. The
// proxy is found by the ledger's id and probed again, never re-created;
// its access log is followed again from its start, and of its three
// records the two the previous process delivered are not reported again:
// one sandbox_egress_request, the third. The counts of the log's summary
// cover the whole log, as without a restart.
func TestReadoptedEgressProxyReportsOnlyWhatWasNotDelivered(t *testing.T) {
	root, hostKey, e := adoptableWith(t, "version: 1\nworkingDirectory: /workspace\ncaches: []\n", func(d *messages.Dispatch) {
		d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: []string{"www.test"}}
	})
	names, err := dockerops.NamesFor(e.AttemptID)
	require.NoError(t, err)
	e.Adoption.Network = names.Network
	e.Created = append(e.Created,
		ledger.Resource{Type: ledger.ResourceNetwork, Name: names.Network, ID: "net-1", Role: "internal"},
		ledger.Resource{Type: ledger.ResourceNetwork, Name: names.Network + "-egress", ID: "net-2", Role: "egress"},
		ledger.Resource{Type: ledger.ResourceContainer, Name: names.Prefix + "-egress", ID: "svc-egress", Role: roleEgressProxy})
	require.NoError(t, ledger.Store{Root: root}.Write(e))
	ad, err := LoadAdoption(root, e, hostKey)
	require.NoError(t, err)
	ad.EgressReported = 2

	host := newFakeHost(t.TempDir())
	host.states = map[string]dockerops.ContainerState{"svc-egress": {Running: true, Status: "running"}}
	host.egressLog = []string{
		"forge1 1764730000 CONNECT www.test 443 200 TCP_TUNNEL 5120",
		"squid diagnostics are not records",
		"forge1 1764730001 CONNECT other.test 443 403 TCP_DENIED 3890",
		"forge1 1764730002 CONNECT www.test 22 403 TCP_DENIED 3890",
	}
	kill := make(chan struct{})
	host.killService = map[string]chan struct{}{"egress": kill}
	catalogue, err := services.Parse(strings.NewReader("egress\tforged-services/egress:t\t" + pinnedID + "\n"))
	require.NoError(t, err)
	probe := readoptOn(t, host, ad, root, hostKey, catalogue, egress.Options{Enabled: true, Ports: []int{443}})
	actortest.ExpectWhere(t, probe, within, func(m messages.AttemptEvent) bool { return m.Event.EventType == "sandbox_egress_ready" })
	close(kill) // the proxy dies: its log ends, the attempt fails
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxEgressFailed), out.Code, out.Message)

	var requests []string
	var summary map[string]int
	for _, m := range probe.Received() {
		ev, ok := m.(messages.AttemptEvent)
		if !ok {
			continue
		}
		switch ev.Event.EventType {
		case "sandbox_egress_request":
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(*ev.Event.Data), &r))
			requests = append(requests, fmt.Sprintf("%v %v:%v", r["decision"], r["host"], r["port"]))
		case "sandbox_egress_log_truncated":
			require.NoError(t, json.Unmarshal([]byte(*ev.Event.Data), &summary))
		}
	}
	assert.Equal(t, []string{"denied www.test:22"}, requests, "only the record not delivered before the restart")
	assert.Equal(t, map[string]int{"reported": 3, "dropped": 0, "unparsed": 1}, summary, "the counts cover the whole log")
	assert.Zero(t, host.called("egress"), "the proxy is never re-created")
	host.mu.Lock()
	defer host.mu.Unlock()
	require.Len(t, host.probes, 1)
	assert.Equal(t, names.Prefix+"-probe-egress", host.probes[0].Name)
	assert.Equal(t, names.Network, host.probes[0].Network)
}

// TestServicesOfAWorkerThatFinishedWhileAwayAreNotReattached: the worker
// finished while no forged ran; its services served a task that is over.
// They are not inspected or probed (one removed meanwhile does not fail
// the attempt), and the ledger keeps them for the teardown.
func TestServicesOfAWorkerThatFinishedWhileAwayAreNotReattached(t *testing.T) {
	root, hostKey, e := adoptableWithServices(t)
	ad, err := LoadAdoption(root, e, hostKey)
	require.NoError(t, err)
	ad.WorkerExited = true
	host := newFakeHost(t.TempDir())
	host.states = runningServices()
	host.states["svc-redis"] = dockerops.ContainerState{Status: "removed"}
	probe := readoptOn(t, host, ad, root, hostKey, testCatalogue(t), egress.Options{})
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 200*time.Millisecond)
	host.mu.Lock()
	assert.Empty(t, host.probes, "no service is probed again")
	host.mu.Unlock()
	got, err := ledger.Store{Root: root}.Read(e.AttemptID)
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range got.Created {
		ids[r.Role] = r.ID
	}
	assert.Equal(t, "svc-postgres", ids["service:postgres"])
	assert.Equal(t, "svc-redis", ids["service:redis"])
	assert.Equal(t, "net-1", ids["internal"])
}
