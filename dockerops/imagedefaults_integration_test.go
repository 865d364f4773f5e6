package dockerops

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// defaultsImage builds, on the agent image, one that sets every default a
// container inherits: a HEALTHCHECK, a STOPSIGNAL, variables (one the
// worker keeps, one it must not), and a VOLUME.
func defaultsImage(t *testing.T) string {
	t.Helper()
	c := requireEngine(t)
	agent := agentImage(t)
	tag := testImagePrefix + "defaults:" + runTag
	imagesMu.Lock()
	testImages = append(testImages, tag)
	imagesMu.Unlock()
	dockerfile := "FROM " + agent + "\n" +
		"HEALTHCHECK --interval=1s --timeout=1s CMD [\"/bin/sh\", \"-c\", \"exit 0\"]\n" +
		"STOPSIGNAL SIGKILL\n" +
		"ENV IMAGE_ONLY=from-image GODEBUG=gctrace=1\n" +
		"VOLUME /data\n"
	ctxTar := tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile)}, nil)
	_, err := c.BuildImage(testCtx(t), BuildRequest{ContextTar: ctxTar, Tags: []string{tag}})
	require.NoError(t, err)
	return tag
}

// recordingEngine is the real engine, with the create configurations it
// was sent kept by container name.
type recordingEngine struct {
	*client.Client
	mu      sync.Mutex
	created map[string]*container.Config
}

func (r *recordingEngine) ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error) {
	r.mu.Lock()
	r.created[name] = cfg
	r.mu.Unlock()
	return r.Client.ContainerCreate(ctx, cfg, host, net, platform, name)
}

func (r *recordingEngine) config(t *testing.T, name string) *container.Config {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := r.created[name]
	require.NotNil(t, cfg, "no container %s was created", name)
	return cfg
}

// Every helper container forged creates from the agent image (a readiness
// probe, the secrets writer, the credential loader) takes none of the
// image's HEALTHCHECK, STOPSIGNAL or ENV (issue 28, finding 9): the probe
// runs with no variable of the image's, and every create says "no health
// check" and SIGTERM. The worker keeps the image's ordinary variables but
// not the Go runtime's knobs.
func TestIntegrationHelpersTakeNoDefaultsFromTheImage(t *testing.T) {
	image := defaultsImage(t)
	s := provisionIsolated(t, `echo "img=[$IMAGE_ONLY] go=[$GODEBUG]"`)
	ctx := testCtx(t)
	rec := &recordingEngine{Client: s.c.raw, created: map[string]*container.Config{}}
	c := newClient(Options{Retry: RetryPolicy{MaxAttempts: 2}}, rec)
	c.raw = s.c.raw

	probe := s.names.Prefix + "-probe-defaults"
	code, stderr, err := c.RunProbe(ctx, ProbeSpec{
		Name: probe, Image: image, Network: s.names.Network, Labels: s.labels,
		Cmd:     []string{"/bin/sh", "-c", `echo "img=[$IMAGE_ONLY] go=[$GODEBUG]" >&2; exit 3`},
		Timeout: 30 * time.Second,
	})
	require.NoError(t, err)
	assert.Equal(t, 3, code, stderr)
	assert.Contains(t, stderr, "img=[] go=[]", "the probe ran with the image's variables")

	require.NoError(t, c.WriteSecrets(ctx, s.names.Prefix+"-secrets-defaults", image, s.names.SecretsVolume, s.labels,
		map[string][]byte{"db": []byte("y")}))
	require.NoError(t, c.LoadVolume(ctx, image, s.names.Prefix+"-loader-defaults", s.names.SecretsVolume, s.labels,
		[]VolumeFile{{Name: "token", Content: []byte("x")}}, 10001, 10001))
	for _, name := range []string{probe, s.names.Prefix + "-secrets-defaults", s.names.Prefix + "-loader-defaults"} {
		cfg := rec.config(t, name)
		require.NotNil(t, cfg.Healthcheck, name)
		assert.Equal(t, []string{"NONE"}, cfg.Healthcheck.Test, name)
		assert.Equal(t, "SIGTERM", cfg.StopSignal, name)
		assert.Subset(t, cfg.Env, []string{"IMAGE_ONLY", "GODEBUG"}, "%s unsets the image's variables", name)
	}

	// The worker: its own create, the same helper with its inheritable set.
	w := provision(t, `echo "img=[$IMAGE_ONLY] go=[$GODEBUG]"`, func(spec *WorkerSpec) { spec.Image = image })
	info, err := w.c.raw.ContainerInspect(ctx, w.container)
	require.NoError(t, err)
	require.NotNil(t, info.Config.Healthcheck)
	assert.Equal(t, []string{"NONE"}, info.Config.Healthcheck.Test)
	assert.Equal(t, "SIGTERM", info.Config.StopSignal)
	lines, res, err := w.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode, "%v", lines)
	assert.Equal(t, []string{"img=[from-image] go=[]"}, lines)
}

// A service image's VOLUME (upstream postgres declares one) gets no
// anonymous volume: a tmpfs of half the service's memory limit, owned by
// the service's user, covers it. A service that fills it stops at that
// bound, and nothing is left after its removal (issue 28, finding 3).
func TestIntegrationServiceImageVolumesAreBounded(t *testing.T) {
	image := defaultsImage(t)
	s := provisionIsolated(t, "true")
	ctx := testCtx(t)
	t.Cleanup(func() { enginetest.AssertNoAnonymousVolumes(t, s.c.raw) })
	const memory = 64 << 20 // the tmpfs: 32 MiB
	spec := ServiceSpec{
		Name: s.names.Prefix + "-svc-filler", Image: image, Network: s.names.Network, Alias: "filler",
		User: "10001:10001", Labels: s.labels, MemoryBytes: memory, NanoCPUs: 500_000_000, PIDs: 32,
		// 48 MiB into the VOLUME: exit 7 when the bound stopped it.
		Cmd: []string{"/bin/sh", "-c", `dd if=/dev/zero of=/data/fill bs=1M count=48 2>/dev/null; ` +
			`n=$(wc -c < /data/fill); [ "$n" -le 33554432 ] && [ "$n" -gt 0 ] && exit 7; exit 9`},
	}
	id, err := s.c.CreateSidecar(ctx, spec)
	require.NoError(t, err)
	state, err := s.c.WaitStopped(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 7, state.ExitCode, "the service wrote past a bound of 32 MiB, or nothing")

	info, err := s.c.raw.ContainerInspect(ctx, id)
	require.NoError(t, err)
	for _, m := range info.Mounts {
		assert.NotEqual(t, mount.TypeVolume, m.Type, "an anonymous volume: %+v", m)
	}
	require.Contains(t, info.HostConfig.Tmpfs, "/data")
	assert.True(t, strings.Contains(info.HostConfig.Tmpfs["/data"], "size=32m") &&
		strings.Contains(info.HostConfig.Tmpfs["/data"], "uid=10001"), info.HostConfig.Tmpfs["/data"])
}
