package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"github.com/forgedev/forged/internal/kit/ids"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// Integration tests run whenever a Docker engine answers. Without one they
// skip, except under CI=true where a missing engine fails them.

const testImagePrefix = "forged-test/"

var (
	engineOnce   sync.Once
	engineClient *Client
	engineErr    error

	imagesMu    sync.Mutex
	runTag      = ids.NewUUID()[:8]
	baseImageID string
	agentRef    string
	testImages  []string // tags to remove when the package's tests end
)

// requireEngine returns the shared engine client or skips (fails under CI).
func requireEngine(t *testing.T) *Client {
	t.Helper()
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		engineClient, engineErr = Connect(ctx, Options{Retry: RetryPolicy{MaxAttempts: 2}})
	})
	if engineErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no Docker engine answers: %v", engineErr)
		}
		t.Skipf("no Docker engine answers, skipping integration test: %v", engineErr)
	}
	return engineClient
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// tarOf builds an in-memory tar of regular files.
func tarOf(t *testing.T, files map[string][]byte, modes map[string]int64) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		mode := int64(0o644)
		if m, ok := modes[name]; ok {
			mode = m
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: mode}))
		_, err := tw.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return &buf
}

// baseImage builds (once) a FROM scratch image holding busybox.
func baseImage(t *testing.T) string {
	t.Helper()
	c := requireEngine(t)
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if baseImageID != "" {
		return baseImageID
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no static busybox at /bin/busybox: %v", err)
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\",\"--install\",\"-s\",\"/bin\"]\n"
	tag := testImagePrefix + "busybox:" + runTag
	ctxTar := tarOf(t, map[string][]byte{"Dockerfile": []byte(dockerfile), "busybox": busybox}, map[string]int64{"busybox": 0o755})
	testImages = append(testImages, tag)
	id, err := c.BuildImage(testCtx(t), BuildRequest{ContextTar: ctxTar, Tags: []string{tag}, Labels: map[string]string{"dev.forge.test": "true"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "sha256:"), id)
	baseImageID = id
	return id
}

// agentImage builds (once) the overlay on the base image, with busybox as
// the "worker binary".
func agentImage(t *testing.T) string {
	t.Helper()
	base := baseImage(t)
	c := requireEngine(t)
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if agentRef != "" {
		return agentRef
	}
	worker, err := os.ReadFile("/bin/busybox")
	require.NoError(t, err)
	overlay, err := OverlayContext(base, bytes.NewReader(worker), int64(len(worker)))
	require.NoError(t, err)
	tag := testImagePrefix + "agent:" + runTag
	testImages = append(testImages, tag)
	var logs []string
	_, err = c.BuildImage(testCtx(t), BuildRequest{ContextTar: overlay, Tags: []string{tag}, OnLog: func(l string) { logs = append(logs, l) }})
	require.NoError(t, err, strings.Join(logs, "\n"))
	agentRef = tag
	return tag
}

func removeTestImages() {
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if engineClient == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := len(testImages) - 1; i >= 0; i-- {
		_ = engineClient.RemoveImage(ctx, testImages[i])
	}
	_ = engineClient.Close()
}

// testDispatch is a valid dispatch with fresh random identities (the
// harness's, with this package's repository and smaller resources).
func testDispatch() *messages.Dispatch {
	d := actortest.NewDispatch(time.Now().Add(time.Hour).UTC().Truncate(time.Second))
	d.Repo = messages.RepoRef{Name: "forged/dockerops-test", LocalPath: "/tmp/repo", DefaultBranch: "main"}
	d.Lease.WorktreeKey = "forge/test"
	d.Sandbox.RequestedResources = messages.RequestedResources{WorkerMemoryLimitBytes: 256 << 20, CPUMillis: 500, PIDs: 64}
	return d
}

// sandbox is one provisioned attempt.
type sandbox struct {
	c         *Client
	d         *messages.Dispatch
	owner     Ownership
	names     Names
	labels    map[string]string
	network   IsolatedNetwork // zero unless provisionIsolated
	container string
}

// provision creates the attempt's volumes and worker (running script with
// /bin/sh, network none unless tweak sets one) and registers its teardown
// and the leftover check.
func provision(t *testing.T, script string, tweak func(*WorkerSpec)) *sandbox {
	t.Helper()
	return provisionWith(t, script, false, tweak)
}

// provisionIsolated is provision with the worker on a fresh isolated
// network (CreateIsolatedNetwork) named after the attempt.
func provisionIsolated(t *testing.T, script string) *sandbox {
	t.Helper()
	return provisionWith(t, script, true, nil)
}

func provisionWith(t *testing.T, script string, isolated bool, tweak func(*WorkerSpec)) *sandbox {
	t.Helper()
	return provisionOn(t, requireEngine(t), script, isolated, tweak)
}

// provisionOn is provisionWith on the client c (one derived from the
// engine's, say).
func provisionOn(t *testing.T, c *Client, script string, isolated bool, tweak func(*WorkerSpec)) *sandbox {
	t.Helper()
	image := agentImage(t)
	ctx := testCtx(t)
	d := testDispatch()
	s := &sandbox{c: c, d: d, owner: OwnershipOf(d)}
	var err error
	s.names, err = NamesFor(d.AttemptID())
	require.NoError(t, err)
	s.labels, err = Labels(d, "sha256:test-image", "sha256:test-contract")
	require.NoError(t, err)
	requireNoLeftovers(t, c, d.AttemptID())
	t.Cleanup(func() {
		report, err := c.Teardown(context.Background(), s.owner, "teardown")
		if err != nil {
			t.Errorf("teardown: %v (report %+v)", err, report)
		}
	})

	if isolated {
		s.network, err = c.CreateIsolatedNetwork(ctx, s.names.Network, s.labels)
		require.NoError(t, err)
	}
	for _, v := range []string{s.names.WorkspaceVolume, s.names.ControlVolume, s.names.SecretsVolume} {
		require.NoError(t, c.CreateVolume(ctx, v, s.labels))
	}
	spec := WorkerSpec{
		Name: s.names.Container, Image: image, WorkingDir: messages.WorkspaceDir,
		Labels: s.labels, Resources: d.Sandbox.RequestedResources, Env: WorkerEnv(d, strings.Repeat("a", 40)),
		WorkspaceVolume: s.names.WorkspaceVolume, ControlVolume: s.names.ControlVolume, SecretsVolume: s.names.SecretsVolume,
		Entrypoint: []string{"/bin/sh", "-c", script},
	}
	if isolated {
		spec.Network = s.names.Network
	}
	if tweak != nil {
		tweak(&spec)
	}
	s.container, err = c.CreateWorker(ctx, spec)
	require.NoError(t, err)
	return s
}

// requireNoLeftovers registers a final check that no container, network or
// volume labelled with the attempt remains.
func requireNoLeftovers(t *testing.T, c *Client, attemptID string) {
	t.Helper()
	t.Cleanup(func() {
		if n := labelledCount(t, c, LabelAttemptID+"="+attemptID); n != 0 {
			t.Errorf("%d Docker objects labelled with attempt %s remain", n, attemptID)
		}
		enginetest.AssertNoAnonymousVolumes(t, c.raw)
	})
}

// labelledCount counts the containers, networks and volumes carrying label.
func labelledCount(t *testing.T, c *Client, label string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", label))
	cs, err := c.raw.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	require.NoError(t, err)
	ns, err := c.raw.NetworkList(ctx, network.ListOptions{Filters: f})
	require.NoError(t, err)
	vs, err := c.raw.VolumeList(ctx, volume.ListOptions{Filters: f})
	require.NoError(t, err)
	return len(cs) + len(ns) + len(vs.Volumes)
}

// run runs the sandbox's worker attached and collects its stdout lines.
func (s *sandbox) run(t *testing.T, ctx context.Context, stdin string, limits RunLimits) ([]string, RunResult, error) {
	t.Helper()
	var lines []string
	res, err := s.c.RunAttached(ctx, s.container, []byte(stdin), func(line []byte) error {
		lines = append(lines, string(line))
		return nil
	}, limits)
	return lines, res, err
}
