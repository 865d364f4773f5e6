package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/testkit/testbin"
	"github.com/forgedev/forged/messages"
)

// These tests run attempts with real postgres and redis services from the
// catalogue scripts/service-images.sh builds (bin/services.tsv, or
// $FORGED_SERVICES_FILE). The task talks to them through svcclient
// (services/testdata/svcclient), a static Go client the project image
// carries.

const (
	servicesContract = "version: 1\nworkingDirectory: /workspace\nservices:\n  - type: postgres\n  - type: redis\ncaches: []\n"
	serviceMemory    = 2 << 30
)

// serviceCatalogue loads the real catalogue: skipped without one, failed
// with CI=true.
func serviceCatalogue(t *testing.T) (*services.Catalogue, string) {
	t.Helper()
	path := os.Getenv("FORGED_SERVICES_FILE")
	if path == "" {
		path = filepath.Join("..", "..", "..", "bin", "services.tsv")
	}
	c, err := services.Load(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no service catalogue (run scripts/service-images.sh): %v", err)
		}
		t.Skipf("no service catalogue (run scripts/service-images.sh): %v", err)
	}
	return c, path
}

// svcclientBinary builds the static test client once per test process.
func svcclientBinary(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "svcclient", filepath.Join("..", "..", "sandbox", "services"), "-trimpath", "-ldflags=-s -w", "./testdata/svcclient")
}

// newServicesE2E is an e2e whose repository declares postgres and redis and
// whose project image carries svcclient.
func newServicesE2E(t *testing.T, cfg runner.Config) *e2e {
	t.Helper()
	if cfg.Services == nil {
		cfg.Services, _ = serviceCatalogue(t)
	}

	bin := svcclientBinary(t)
	e := newE2E(t, cfg)
	content, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, "svcclient"), content, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "forge.sandbox.yml"), []byte(servicesContract), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "Dockerfile"),
		[]byte("FROM "+example.BaseImage+"\nCOPY svcclient /usr/local/bin/svcclient\n"), 0o644))
	e.git("add", "-A")
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "services")
	return e
}

func (e *e2e) serviceDispatch(argv []string) *messages.Dispatch {
	d := e.dispatch(argv, 256<<20)
	d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = serviceMemory
	return d
}

// secretSpy records the service credentials the attempt writes and, when
// the worker starts, every attempt container's full inspect document.
type secretSpy struct {
	actors.Docker
	engine interface {
		ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
		ContainerInspectWithRaw(ctx context.Context, id string, size bool) (container.InspectResponse, []byte, error)
	}
	mu       sync.Mutex
	files    map[string][]byte
	inspects [][]byte
	tree     func() []messages.InspectReply
	trees    []byte
}

func (s *secretSpy) WriteSecrets(ctx context.Context, name, image, volume string, labels map[string]string, files map[string][]byte) error {
	s.mu.Lock()
	if s.files == nil {
		s.files = map[string][]byte{}
	}
	maps.Copy(s.files, files) // the attempt's volume, then each service's own
	s.mu.Unlock()
	return s.Docker.WriteSecrets(ctx, name, image, volume, labels, files)
}

func (s *secretSpy) RunAttached(ctx context.Context, id string, stdin []byte, onLine func([]byte) error, limits dockerops.RunLimits) (dockerops.RunResult, error) {
	list, err := s.engine.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", dockerops.LabelManaged+"=true"))})
	if err == nil {
		for _, c := range list {
			if _, raw, err := s.engine.ContainerInspectWithRaw(ctx, c.ID, false); err == nil {
				s.mu.Lock()
				s.inspects = append(s.inspects, raw)
				s.mu.Unlock()
			}
		}
	}
	if s.tree != nil {
		raw, _ := json.Marshal(s.tree())
		s.mu.Lock()
		s.trees = raw
		s.mu.Unlock()
	}
	return s.Docker.RunAttached(ctx, id, stdin, onLine, limits)
}

// isolations are the isolation floors the real-engine tests that hold
// under both run under, with the OCI runtime a worker on an attempt
// network gets (gVisor: runsc's network registration, scripts/ensure-runsc.sh).
var isolations = []struct{ floor, networkRuntime string }{
	{messages.IsolationRunc, "runc"},
	{messages.IsolationGVisor, "runsc-net"},
}

// TestServicesEndToEndTaskTalksToPostgresAndRedisAndSecretsStayInTheVolume
// runs under both floors, and under gVisor once more with the services
// under gVisor too (--gvisor-services).
func TestServicesEndToEndTaskTalksToPostgresAndRedisAndSecretsStayInTheVolume(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); servicesTalk(t, iso.floor, iso.networkRuntime, false) })
	}
	t.Run("gvisor-services", func(t *testing.T) { servicesTalk(t, messages.IsolationGVisor, "runsc-net", true) })
}

// servicesTalk runs the services attempt under the floor given: the task
// talks to both services by name, and the worker ran under runtime; so did
// the services when gvisorServices is set (runc otherwise).
func servicesTalk(t *testing.T, floor, runtime string, gvisorServices bool) {
	serviceRuntime := "runc"
	if gvisorServices {
		serviceRuntime = runtime
	}
	spy := &secretSpy{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newServicesE2E(t, runner.Config{Logger: logger, Isolation: floor, GVisorServices: gvisorServices,
		WrapDocker: func(d actors.Docker) actors.Docker { spy.Docker = d; return spy }})
	spy.engine = e.engine
	spy.tree = e.runner.Inspect
	d := e.serviceDispatch([]string{"/usr/local/bin/svcclient", "talk"})
	log := e.submit(d)
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))

	assert.Equal(t, "postgres: written by the task in forge as forge; escape refused\nredis: stored by the task\nsecrets: read-only",
		e.git("show", example.Branch+":services.txt"), "the task read back what it wrote, and committed it")
	require.NotNil(t, out.Telemetry, "the memory record")
	peaks := map[string]uint64{}
	for _, c := range out.Telemetry.Containers {
		peaks[c.Role] = c.PeakMemoryBytes
	}
	t.Logf("memory peaks under %s (services under %s): %v", floor, serviceRuntime, peaks)
	assert.Positive(t, peaks["agent"])
	assert.Positive(t, peaks["service:postgres"], "the sampler keys the services by role: %v", peaks)
	assert.Positive(t, peaks["service:redis"], "the sampler keys the services by role: %v", peaks)
	types := map[string]int{}
	for _, ev := range log.Events() {
		types[ev.EventType]++
	}
	assert.Equal(t, 2, types["sandbox_service_ready"])

	// The generated credentials: two, fresh, and nowhere but the volume.
	spy.mu.Lock()
	defer spy.mu.Unlock()
	require.Len(t, spy.files, 2)
	var secrets []string
	for name, v := range spy.files {
		require.GreaterOrEqual(t, len(v), 32, name)
		secrets = append(secrets, string(v))
	}
	require.NotEmpty(t, spy.inspects, "inspect documents were captured while the services ran")
	assert.GreaterOrEqual(t, len(spy.inspects), 3, "worker and both services")
	haystacks := map[string][]byte{"trees": spy.trees}
	for i, raw := range spy.inspects {
		haystacks["inspect "+string(rune('a'+i))] = raw
	}
	events, _ := json.Marshal(log.Events())
	outcome, _ := json.Marshal(out)
	haystacks["events"], haystacks["outcome"] = events, outcome
	logMu.Lock()
	haystacks["logs"] = bytes.Clone(logs.Bytes())
	logMu.Unlock()
	reports, err := e.runner.CleanupReports()
	require.NoError(t, err)
	haystacks["cleanup reports"], _ = json.Marshal(reports)
	require.NoError(t, filepath.WalkDir(e.stateRoot, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err == nil {
			haystacks["state "+path] = raw
		}
		return nil
	}))
	for name, hay := range haystacks {
		for _, secret := range secrets {
			assert.False(t, bytes.Contains(hay, []byte(secret)), "a service password leaked into %s", name)
		}
	}
	// No service container mounts the attempt's secrets volume (the
	// provider credential, every password): each has only its own
	// password's volume, read-only.
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, raw := range spy.inspects {
		var c container.InspectResponse
		require.NoError(t, json.Unmarshal(raw, &c))
		if c.Name == "/"+names.Container {
			seen["worker"] = true
			assert.Equal(t, runtime, c.HostConfig.Runtime, "the worker's runtime")
		}
		for _, svc := range []string{"postgres", "redis"} {
			if c.Name != "/"+names.Prefix+"-"+svc {
				continue
			}
			seen[svc] = true
			assert.Equal(t, serviceRuntime, c.HostConfig.Runtime, "service %s's runtime", svc)
			if gvisorServices {
				require.NotNil(t, c.HostConfig.PidsLimit)
				def, ok := services.DefinitionFor(svc)
				require.True(t, ok)
				assert.Equal(t, dockerops.GVisorPIDsLimit(def.PIDs), *c.HostConfig.PidsLimit, "service %s's pids limit is translated for gVisor", svc)
			}
			var mounted []string
			for _, m := range c.Mounts {
				mounted = append(mounted, m.Name)
				assert.NotEqual(t, names.SecretsVolume, m.Name, "service %s mounts the attempt's secrets volume", svc)
				if m.Name == names.Prefix+"-secrets-"+svc {
					assert.False(t, m.RW, "its own secret is read-only")
				}
			}
			assert.Equal(t, []string{names.Prefix + "-secrets-" + svc}, mounted, "service %s", svc)
		}
	}
	assert.Equal(t, map[string]bool{"postgres": true, "redis": true, "worker": true}, seen, "the worker and both services were inspected while they ran")

	// The inspect documents do hold the connection details.
	joined := bytes.Join(spy.inspects, nil)
	assert.Contains(t, string(joined), "FORGE_POSTGRES_PASSWORD_FILE=/run/forge-secrets/postgres-password")
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// unreadyProbes points every readiness probe at a port nothing listens
// on: the real probe keeps trying until its own cap passes, however soon
// the service itself is up (on a loaded host the probe container may
// start only once postgres already answers).
type unreadyProbes struct{ actors.Docker }

func (d unreadyProbes) RunProbe(ctx context.Context, spec dockerops.ProbeSpec) (int, string, error) {
	spec.Cmd = slices.Clone(spec.Cmd)
	for i := range len(spec.Cmd) - 1 {
		if spec.Cmd[i] == "--port" {
			spec.Cmd[i+1] = "1"
		}
	}
	return d.Docker.RunProbe(ctx, spec)
}

func TestServicesEndToEndHealthTimeoutGivesItsCode(t *testing.T) {
	e := newServicesE2E(t, runner.Config{ServiceReadyWithin: 300 * time.Millisecond,
		WrapDocker: func(d actors.Docker) actors.Docker { return unreadyProbes{d} }})
	out := e.wait(e.submit(e.serviceDispatch([]string{"/bin/true"})))
	assert.Equal(t, string(failure.SandboxServiceHealthTimeout), out.Code, out.Message)
	assert.Contains(t, out.Message, "did not pass its readiness probe within 300ms")
	assert.Equal(t, messages.PhaseProvisioning, out.Phase)
	require.NotNil(t, out.Cleanup)
	assert.Zero(t, out.Cleanup.Remaining)
}

func TestServicesEndToEndServiceKilledMidRunFailsTheAttempt(t *testing.T) {
	e := newServicesE2E(t, runner.Config{})
	d := e.serviceDispatch([]string{"/bin/sh", "-c", "sleep 120"})
	log := e.submit(d)
	waitForEvent(t, log, "worker_started")
	names, err := dockerops.NamesFor(d.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.engine.ContainerKill(ctx, services.ContainerName(names.Prefix, services.Postgres), "KILL"))
	out := e.wait(log)
	assert.Equal(t, string(failure.SandboxServiceFailed), out.Code, out.Message)
	assert.Contains(t, out.Message, "postgres")
	assert.Contains(t, out.Message, "while the worker ran")
	assert.Equal(t, messages.PhaseRunning, out.Phase)
}

func TestServicesEndToEndCatalogueRefusesBeforeAnythingExists(t *testing.T) {
	real, _ := serviceCatalogue(t)
	pg, ok := real.Lookup(services.Postgres)
	require.True(t, ok)
	rd, _ := real.Lookup(services.Redis)
	for _, tc := range []struct {
		name, line string
		code       failure.Code
	}{
		{"wrong digest", pg.Ref + "\tsha256:" + strings.Repeat("0", 64), failure.SandboxServiceImageDiffers},
		{"missing image", "forged-services/postgres:not-built\t" + pg.ImageID, failure.SandboxServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := services.Parse(strings.NewReader("postgres\t" + tc.line + "\nredis\t" + rd.Ref + "\t" + rd.ImageID + "\n"))
			require.NoError(t, err)
			e := newServicesE2E(t, runner.Config{Services: c})
			d := e.serviceDispatch([]string{"/bin/true"})
			log := e.submit(d)
			out := e.wait(log)
			assert.Equal(t, string(tc.code), out.Code, out.Message)
			assert.Equal(t, messages.PhasePreparing, out.Phase)
			for _, ev := range log.Events() {
				assert.NotContains(t, []string{"sandbox_image_built", "sandbox_image_cache_hit", "sandbox_started", "sandbox_service_starting"}, ev.EventType)
			}
			require.NotNil(t, out.Cleanup)
			assert.Empty(t, out.Cleanup.Actions, "nothing was created, so nothing was removed")
		})
	}
}

func TestServicesEndToEndTwoAttemptsCannotReachEachOthersServices(t *testing.T) {
	e := newServicesE2E(t, runner.Config{Slots: 2})
	// B holds its services while A tries to reach them.
	b := e.serviceDispatch([]string{"/bin/sh", "-c", "sleep 120"})
	b.Lease.WorktreeKey = "forge/other-task"
	logB := e.submit(b)
	waitForEvent(t, logB, "worker_started")
	namesB, err := dockerops.NamesFor(b.AttemptID())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var targets []string
	for _, s := range []string{services.Postgres, services.Redis} {
		def, _ := services.DefinitionFor(s)
		info, err := e.engine.ContainerInspect(ctx, services.ContainerName(namesB.Prefix, s))
		require.NoError(t, err)
		for _, ep := range info.NetworkSettings.Networks {
			require.NotEmpty(t, ep.IPAddress)
			targets = append(targets, ep.IPAddress+":"+strconv.Itoa(def.Port))
		}
	}
	require.Len(t, targets, 2, "each of B's services is on exactly one network")

	a := e.serviceDispatch([]string{"/bin/sh", "-c", "/usr/local/bin/svcclient talk && /usr/local/bin/svcclient reach " + strings.Join(targets, " ")})
	outA := e.wait(e.submit(a))
	require.Equal(t, messages.StatusSucceeded, outA.Status, "%s: %s", outA.Code, outA.Message)
	reach := e.git("show", example.Branch+":reach.txt")
	for _, target := range targets {
		assert.Contains(t, reach, target+" unreachable")
	}
	assert.NotContains(t, reach, " reachable")
	assert.Contains(t, e.git("show", example.Branch+":services.txt"), "written by the task", "A's own services answered")

	_, err = e.runner.Cancel(b.AttemptID(), "test done")
	require.NoError(t, err)
	outB := e.wait(logB)
	assert.Equal(t, string(failure.SandboxCancelled), outB.Code)
}

// TestServicesEndToEndBrowserAnswersDevTools runs under runc, and under
// gVisor with the browser under gVisor too (--gvisor-services).
func TestServicesEndToEndBrowserAnswersDevTools(t *testing.T) {
	t.Run("runc", func(t *testing.T) { browserAnswers(t, runner.Config{}) })
	t.Run("gvisor-services", func(t *testing.T) {
		browserAnswers(t, runner.Config{Isolation: messages.IsolationGVisor, GVisorServices: true})
	})
}

func browserAnswers(t *testing.T, cfg runner.Config) {
	catalogue, _ := serviceCatalogue(t)
	if _, ok := catalogue.Lookup(services.Browser); !ok {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but the catalogue has no browser (run scripts/service-images.sh)")
		}
		t.Skip("the catalogue has no browser (run scripts/service-images.sh)")
	}
	cfg.Services = catalogue
	created := &serviceRuntimes{runtimes: map[string]string{}}
	cfg.WrapDocker = func(d actors.Docker) actors.Docker { created.Docker = d; return created }
	e := newServicesE2E(t, cfg)
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "forge.sandbox.yml"),
		[]byte("version: 1\nworkingDirectory: /workspace\nservices:\n  - type: browser\ncaches: []\n"), 0o644))
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-am", "browser")
	d := e.serviceDispatch([]string{"/usr/local/bin/svcclient", "browser"})
	d.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 1 << 30
	log := e.submit(d)
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.Contains(t, e.git("show", example.Branch+":browser.txt"), "browser: Chrome/")
	want := ""
	if cfg.GVisorServices {
		want = "runsc-net"
	}
	created.mu.Lock()
	defer created.mu.Unlock()
	assert.Equal(t, map[string]string{services.Browser: want}, created.runtimes, "the browser's runtime (empty: the engine's default)")
}

// serviceRuntimes records the runtime each service was created under.
type serviceRuntimes struct {
	actors.Docker
	mu       sync.Mutex
	runtimes map[string]string
}

func (s *serviceRuntimes) CreateSidecar(ctx context.Context, spec dockerops.Sidecar) (string, error) {
	if svc, ok := spec.(dockerops.ServiceSpec); ok {
		s.mu.Lock()
		s.runtimes[svc.Alias] = svc.Runtime
		s.mu.Unlock()
	}
	return s.Docker.CreateSidecar(ctx, spec)
}

// guardedServices records which services were created with a netns guard.
type guardedServices struct {
	actors.Docker
	mu      sync.Mutex
	guarded map[string]bool
}

func (g *guardedServices) CreateSidecar(ctx context.Context, spec dockerops.Sidecar) (string, error) {
	if s, ok := spec.(dockerops.ServiceSpec); ok {
		g.mu.Lock()
		g.guarded[s.Alias] = s.Guard != nil && s.Guard.Rules != ""
		g.mu.Unlock()
	}
	return g.Docker.CreateSidecar(ctx, spec)
}

// TestServicesEndToEndOnOpenPublicAreGuardedAndStillServe: on an
// open_public network the services get the worker's netns guard, and the
// task, itself in its guarded holder's namespace, still talks to both.
func TestServicesEndToEndOnOpenPublicAreGuardedAndStillServe(t *testing.T) {
	spy := &guardedServices{guarded: map[string]bool{}}
	e := newServicesE2E(t, runner.Config{AllowOpenPublic: true, WrapDocker: func(d actors.Docker) actors.Docker { spy.Docker = d; return spy }})
	d := e.serviceDispatch([]string{"/usr/local/bin/svcclient", "talk"})
	d.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkOpenPublic}
	out := e.wait(e.submit(d))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	assert.Contains(t, e.git("show", example.Branch+":services.txt"), "postgres: written by the task")
	spy.mu.Lock()
	defer spy.mu.Unlock()
	assert.Equal(t, map[string]bool{"postgres": true, "redis": true}, spy.guarded)
}
