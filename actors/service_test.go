package actors

import (
	"encoding/json"
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
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

const (
	pinnedID    = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	servicesYML = "version: 1\nworkingDirectory: /workspace\nservices:\n  - type: postgres\n  - type: redis\n"
)

func testCatalogue(t *testing.T) *services.Catalogue {
	t.Helper()
	c, err := services.Parse(strings.NewReader(
		"postgres\tforged-services/postgres:t\t" + pinnedID + "\n" +
			"redis\tforged-services/redis:t\t" + pinnedID + "\n"))
	require.NoError(t, err)
	return c
}

// serviceHarness is a harness whose attempts run services from a catalogue
// whose images the fake engine holds with the pinned id.
func serviceHarness(t *testing.T, host *fakeHost, clk clock.Clock) *harness {
	host.contract = servicesYML
	host.catalogueID = pinnedID
	h := newHarness(t, host, clk)
	h.cfg.Services = testCatalogue(t)
	return h
}

func serviceDispatch() *messages.Dispatch {
	d := testDispatch(time.Now().Add(time.Hour))
	d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 2 << 30
	return d
}

func TestServicesStartBeforeTheWorkerAndReachItOnlyByFile(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	d := serviceDispatch()
	probe := h.submit(t, d)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)

	host.mu.Lock()
	defer host.mu.Unlock()
	// Order: credentials, both services, both probes, then the worker.
	first := func(step string) int {
		for i, c := range host.calls {
			if c == step {
				return i
			}
		}
		t.Fatalf("%s never called: %v", step, host.calls)
		return -1
	}
	assert.Less(t, first("secrets"), first("service:postgres"))
	assert.Less(t, first("service:redis"), first("create"))
	assert.Less(t, first("probe"), first("create"))

	// Fresh, distinct credentials, only in the secrets volume.
	require.Len(t, host.secrets, 2)
	pg, rd := string(host.secrets["postgres-password"]), string(host.secrets["redis-password"])
	assert.Len(t, pg, 43)
	assert.NotEqual(t, pg, rd)

	// No service mounts the attempt's secrets volume (the provider
	// credential, every password): each mounts a volume holding only its
	// own password, as does its probe.
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	assert.Equal(t, host.secrets, host.secretVolumes[names.SecretsVolume], "the worker's volume holds both")
	for _, spec := range sidecarsOf[dockerops.ServiceSpec](host) {
		assert.NotEqual(t, names.SecretsVolume, spec.SecretsVolume, spec.Alias)
		assert.Equal(t, names.Prefix+"-secrets-"+spec.Alias, spec.SecretsVolume)
		own := host.secretVolumes[spec.SecretsVolume]
		require.Len(t, own, 1, spec.Alias)
		assert.Equal(t, host.secrets[spec.Alias+"-password"], own[spec.Alias+"-password"])
	}
	for _, p := range host.probes {
		assert.NotEqual(t, names.SecretsVolume, p.SecretsVolume, p.Name)
	}

	// Hardened, split memory, on the attempt network under their aliases,
	// from the pinned id.
	require.Len(t, sidecarsOf[dockerops.ServiceSpec](host), 2)
	for _, spec := range sidecarsOf[dockerops.ServiceSpec](host) {
		assert.Equal(t, pinnedID, spec.Image)
		assert.Equal(t, int64(1<<30), spec.MemoryBytes, "2 GiB split between two services")
		assert.NotEqual(t, "0:0", spec.User)
		assert.Empty(t, spec.CapAdd)
		assert.Equal(t, host.workerSpec().Network, spec.Network)
		assert.Contains(t, []string{"postgres", "redis"}, spec.Alias)
		assert.Nil(t, spec.Guard, "an isolated network has no route to guard")
	}

	// The worker learns where and who, never the password.
	var packet messages.StartPacket
	require.NoError(t, json.Unmarshal(host.stdin, &packet))
	require.Len(t, packet.Services, 2)
	assert.Equal(t, messages.ServiceEndpoint{Type: "postgres", Host: "postgres", Port: 5432, User: "forge", Database: "forge",
		PasswordFile: "/run/forge-secrets/postgres-password"}, packet.Services[0])
	assert.Contains(t, host.workerSpec().Env, "PGHOST=postgres")
	assert.Contains(t, host.workerSpec().Env, "FORGE_REDIS_PASSWORD_FILE=/run/forge-secrets/redis-password")

	everything := string(host.stdin) + strings.Join(host.workerSpec().Env, "\n")
	for _, spec := range sidecarsOf[dockerops.ServiceSpec](host) {
		everything += strings.Join(spec.Env, "\n") + strings.Join(spec.Cmd, " ") + strings.Join(mapValues(spec.Labels), " ")
	}
	raw, _ := json.Marshal(actortest.All[messages.AttemptEvent](probe))
	outRaw, _ := json.Marshal(out)
	everything += string(raw) + string(outRaw)
	assert.NotContains(t, everything, pg)
	assert.NotContains(t, everything, rd)

	types := eventTypes(probe)
	assert.Contains(t, types, "sandbox_service_ready")
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestServiceLedgerPlansAndRecordsServiceContainers(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := serviceHarness(t, host, nil)
	d := serviceDispatch()
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
	roles := map[string]string{}
	for _, r := range e.Created {
		roles[r.Role] = r.ID
	}
	assert.Equal(t, "svc-postgres", roles["service:postgres"])
	assert.Equal(t, "svc-redis", roles["service:redis"])
	planned := 0
	for _, r := range e.Planned {
		if strings.HasPrefix(r.Role, "service:") {
			planned++
		}
	}
	assert.Equal(t, 2, planned)
	_, err := h.system.Root.RequestFuture(h.root, messages.CancelAttempt{AttemptID: d.AttemptID()}, within).Result()
	require.NoError(t, err)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
}

func TestServiceCatalogueRefusalsComeBeforeAnythingExists(t *testing.T) {
	for _, tc := range []struct {
		name, engineID string
		code           failure.Code
	}{
		{"image missing from the engine", "", failure.SandboxServiceUnavailable},
		{"image id differs from the pinned digest", "sha256:2222222222222222222222222222222222222222222222222222222222222222", failure.SandboxServiceImageDiffers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			h := serviceHarness(t, host, nil)
			host.catalogueID = tc.engineID
			out := h.run(t, serviceDispatch())
			assert.Equal(t, string(tc.code), out.Code, out.Message)
			assert.Equal(t, messages.PhasePreparing, out.Phase)
			assert.Zero(t, host.called("lookup")+host.called("network")+host.called("volume")+host.called("secrets")+host.called("create"))
		})
	}
	t.Run("a service the catalogue does not configure", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		h := serviceHarness(t, host, nil)
		host.contract = "version: 1\nservices:\n  - type: browser\n"
		d := serviceDispatch()
		out := h.run(t, d)
		assert.Equal(t, string(failure.SandboxServiceUnavailable), out.Code)
		assert.Contains(t, out.Message, "browser")
		assert.Zero(t, host.called("network"))
	})
	t.Run("service memory below the reservation", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		h := serviceHarness(t, host, nil)
		d := serviceDispatch()
		d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 1 << 30 // two services need 2 GiB
		out := h.run(t, d)
		assert.Equal(t, string(failure.SandboxCapacityProfile), out.Code)
		assert.Zero(t, host.called("catalogue")+host.called("network"))
	})
}

func TestServiceThatFailsItsProbeNeverStartsTheWorker(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	host.probeCode = map[string]int{"redis": 1}
	out := h.run(t, serviceDispatch())
	assert.Equal(t, string(failure.SandboxServiceHealthTimeout), out.Code)
	assert.Contains(t, out.Message, "redis")
	assert.Equal(t, messages.PhaseProvisioning, out.Phase)
	assert.Zero(t, host.called("create"), "no worker without ready services")
	assert.Equal(t, 1, host.teardowns)
}

func TestServicesTotalCapRunsOnTheClock(t *testing.T) {
	host := newFakeHost(t.TempDir())
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := serviceHarness(t, host, clk)
	host.probeBlock = true
	d := testDispatch(clk.Now().Add(time.Hour))
	d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 2 << 30
	probe := h.submit(t, d)
	require.Eventually(t, func() bool { return host.called("probe") == 2 }, within, 5*time.Millisecond)
	actortest.ShouldReceiveNothing[messages.AttemptFinished](t, probe, 50*time.Millisecond)
	clk.Advance(90 * time.Second)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxServiceHealthTimeout), out.Code)
	assert.Contains(t, out.Message, "postgres, redis")
	assert.Zero(t, host.called("create"))
}

func TestServiceDyingMidRunFailsTheAttemptAndIsNeverRestarted(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	kill := make(chan struct{})
	host.killService = map[string]chan struct{}{"postgres": kill}
	h := serviceHarness(t, host, nil)
	probe := h.submit(t, serviceDispatch())
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	close(kill)
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	assert.Equal(t, string(failure.SandboxServiceFailed), out.Code)
	assert.Contains(t, out.Message, "postgres exited with code 137 while the worker ran")
	assert.Equal(t, messages.PhaseRunning, out.Phase)
	assert.Equal(t, 1, host.called("service:postgres"), "a service is never restarted")
	assert.Equal(t, 1, host.teardowns)
}

func TestServiceExitingBeforeReadyFailsFast(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.probeBlock = true
	kill := make(chan struct{})
	close(kill)
	host.killService = map[string]chan struct{}{"redis": kill}
	h := serviceHarness(t, host, nil)
	out := h.run(t, serviceDispatch())
	assert.Equal(t, string(failure.SandboxServiceFailed), out.Code)
	assert.Contains(t, out.Message, "redis exited with code 137 before it was ready")
	assert.Zero(t, host.called("create"))
}

func TestServiceActorsAnswerInspect(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.blockRun = true
	h := serviceHarness(t, host, nil)
	d := serviceDispatch()
	probe := h.submit(t, d)
	select {
	case <-host.runEntered:
	case <-time.After(within):
		t.Fatal("the worker never ran")
	}
	var found []messages.InspectReply
	queue := []*actor.PID{h.root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		res, err := h.system.Root.RequestFuture(pid, messages.Inspect{}, within).Result()
		require.NoError(t, err, pid.GetId())
		reply := res.(messages.InspectReply)
		if reply.Kind == kindService {
			found = append(found, reply)
		}
		for _, child := range reply.Children {
			queue = append(queue, actor.NewPID(h.system.Address(), child))
		}
	}
	require.Len(t, found, 2)
	for _, r := range found {
		assert.Equal(t, kindService, r.Kind)
		assert.Equal(t, "ready", r.Phase)
		assert.Equal(t, "healthy", r.Facts["health"])
	}
	_, err := h.system.Root.RequestFuture(h.root, messages.CancelAttempt{AttemptID: d.AttemptID()}, within).Result()
	require.NoError(t, err)
	actortest.Expect[messages.AttemptFinished](t, probe, within)
}

func TestServiceActorsAreNeverRestarted(t *testing.T) {
	assert.Equal(t, ChildSpec{}, ChildSpecFor(kindService), "a restarted database has lost the task's data")
}

func TestServiceCreatePanicFailsTheAttemptWithoutRestart(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	host.fail["service:redis"] = errPanic
	out := h.run(t, serviceDispatch())
	assert.Equal(t, string(failure.SandboxRuntimeFailed), out.Code, out.Message)
	assert.Contains(t, out.Message, "redis")
	assert.Equal(t, 1, host.called("service:redis"))
	assert.Zero(t, host.called("create"))
	assert.Equal(t, 1, host.teardowns)
}

func TestServiceCatalogueImagesGoThroughTheSignatureHook(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	probe := h.submit(t, serviceDispatch())
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	var warned []string
	for _, ev := range actortest.All[messages.AttemptEvent](probe) {
		if ev.Event.EventType == "sandbox_image_signature_warning" {
			warned = append(warned, ev.Event.Content)
		}
	}
	require.Len(t, warned, 2, "adoption without a verifier warns once per catalogue image")
	assert.Contains(t, warned[0], "forged-services/postgres:t")
	assert.Contains(t, warned[1], "forged-services/redis:t")
}
