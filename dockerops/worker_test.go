package dockerops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func testSpec() WorkerSpec {
	return WorkerSpec{
		Name:            "forge-agent-x",
		Image:           "forge/agent:key",
		WorkingDir:      "/workspace/app",
		Labels:          map[string]string{"dev.forge.managed": "true"},
		Resources:       messages.RequestedResources{WorkerMemoryLimitBytes: 512 << 20, CPUMillis: 1500, PIDs: 256},
		Env:             []string{"A=1", "B=2"},
		SecurityOpts:    []string{"seccomp={}", "apparmor=forge"},
		WorkspaceVolume: "forge-x-workspace",
		ControlVolume:   "forge-x-control",
		SecretsVolume:   "forge-x-secrets",
		Entrypoint:      []string{"/opt/forge/forged", "worker"},
	}
}

func TestWorkerContainerConfig(t *testing.T) {
	spec := testSpec()
	cfg, host, net := WorkerContainerConfig(spec)

	// Container config.
	assert.Equal(t, "forge/agent:key", cfg.Image)
	assert.Equal(t, "10001:10001", cfg.User)
	assert.Equal(t, "/workspace/app", cfg.WorkingDir)
	assert.Equal(t, []string{"A=1", "B=2"}, cfg.Env)
	assert.Equal(t, spec.Labels, cfg.Labels)
	assert.Equal(t, []string{"/opt/forge/forged", "worker"}, []string(cfg.Entrypoint))
	assert.Empty(t, cfg.Cmd)
	assert.True(t, cfg.AttachStdin)
	assert.True(t, cfg.AttachStdout)
	assert.True(t, cfg.AttachStderr)
	assert.True(t, cfg.OpenStdin)
	assert.True(t, cfg.StdinOnce)
	assert.False(t, cfg.Tty)
	require.NotNil(t, cfg.StopTimeout)
	assert.Equal(t, 10, *cfg.StopTimeout)
	assert.False(t, cfg.NetworkDisabled)

	// Host config.
	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Empty(t, host.CapAdd)
	assert.False(t, host.Privileged)
	assert.Equal(t, []string{"no-new-privileges", "seccomp={}", "apparmor=forge"}, host.SecurityOpt)
	require.NotNil(t, host.PidsLimit)
	assert.Equal(t, int64(256), *host.PidsLimit)
	assert.Equal(t, int64(512<<20), host.Memory)
	assert.Equal(t, int64(512<<20), host.MemorySwap)
	assert.Equal(t, int64(1_500_000_000), host.NanoCPUs)
	assert.Equal(t, []*container.Ulimit{
		{Name: "nofile", Soft: 4096, Hard: 4096},
		{Name: "core", Soft: 0, Hard: 0},
	}, host.Ulimits)
	assert.Equal(t, map[string]string{
		"/tmp":        "rw,nosuid,nodev,exec,size=256m,uid=10001,gid=10001,mode=1777",
		"/home/forge": "rw,nosuid,nodev,exec,size=256m,uid=10001,gid=10001,mode=0700",
		"/run/forge":  "rw,nosuid,nodev,noexec,size=32m,uid=10001,gid=10001",
	}, host.Tmpfs)
	require.NotNil(t, host.Init)
	assert.True(t, *host.Init)
	assert.Equal(t, container.LogConfig{Type: "none"}, host.LogConfig)
	assert.Equal(t, container.NetworkMode("none"), host.NetworkMode, "no attempt network: loopback only")
	assert.Equal(t, []string{"127.0.0.1"}, host.DNS, "the only nameserver is the container's own loopback")
	assert.Empty(t, host.DNSSearch)
	assert.Empty(t, host.ExtraHosts)
	assert.Empty(t, host.Binds)
	assert.Empty(t, host.PortBindings)
	assert.False(t, host.AutoRemove)
	assert.Equal(t, []mount.Mount{
		{Type: mount.TypeVolume, Source: "forge-x-workspace", Target: "/workspace"},
		{Type: mount.TypeVolume, Source: "forge-x-control", Target: "/control"},
		{Type: mount.TypeVolume, Source: "forge-x-secrets", Target: "/run/forge-secrets", ReadOnly: true},
	}, host.Mounts)
	for _, m := range host.Mounts {
		assert.Nil(t, m.VolumeOptions, "no volume-nocopy: copy-up sets the owner")
	}

	// No network at all.
	assert.Empty(t, net.EndpointsConfig)

	// The spec's slices and maps are not shared.
	cfg.Env[0] = "changed"
	cfg.Labels["x"] = "y"
	host.SecurityOpt[1] = "changed"
	assert.Equal(t, "A=1", spec.Env[0])
	assert.NotContains(t, spec.Labels, "x")
	assert.Equal(t, "seccomp={}", spec.SecurityOpts[0])
}

func TestWorkerContainerConfigOnIsolatedNetwork(t *testing.T) {
	spec := testSpec()
	spec.Network = "forge-x"
	_, host, net := WorkerContainerConfig(spec)
	assert.Equal(t, container.NetworkMode("forge-x"), host.NetworkMode)
	require.Len(t, net.EndpointsConfig, 1)
	assert.Contains(t, net.EndpointsConfig, "forge-x")
	assert.Equal(t, map[string]string{
		"net.ipv6.conf.all.disable_ipv6":     "1",
		"net.ipv6.conf.default.disable_ipv6": "1",
	}, host.Sysctls, "IPv6 is off inside the container: the bridge's link-local address is out of reach")
	assert.Equal(t, []string{"127.0.0.1"}, host.DNS)

	host.Sysctls["x"] = "y"
	_, again, _ := WorkerContainerConfig(spec)
	assert.NotContains(t, again.Sysctls, "x", "the sysctls are not shared")
}

func TestScratchTmpfsBytes(t *testing.T) {
	for _, tc := range []struct{ memory, want int64 }{
		{256 << 20, 128 << 20},
		{1 << 30, 512 << 20},
		{(1 << 30) + 3<<20 + 12345, 513 << 20}, // half, rounded down to MiB
		{64 << 20, 32 << 20},
		{16 << 20, MinScratchTmpfsBytes},
		{0, MinScratchTmpfsBytes},
		{64 << 30, MaxScratchTmpfsBytes},
	} {
		assert.Equal(t, tc.want, ScratchTmpfsBytes(tc.memory), "memory %d", tc.memory)
	}
}

func TestWorkerEnv(t *testing.T) {
	d := fixedDispatch()
	sha := "0123456789abcdef0123456789abcdef01234567"
	assert.Equal(t, []string{
		"FORGE_SESSION_ID=00000000-0000-4000-8000-000000000001",
		"FORGE_DISPATCH_ATTEMPT_ID=0123abcd-0000-4000-8000-00000000abcd",
		"FORGE_RESOURCE_LEASE_ID=00000000-0000-4000-8000-000000000005",
		"FORGE_EXECUTION_LEASE_ID=00000000-0000-4000-8000-000000000005",
		"FORGE_RUNTIME_MODE=docker",
		"FORGE_SANDBOX_ID=0123abcd-0000-4000-8000-00000000abcd",
		"FORGE_WORKSPACE=/workspace",
		"FORGE_WORKTREE_PATH=/workspace",
		"FORGE_TMPDIR=/tmp",
		"FORGE_LOG_DIR=/control/output/logs",
		"FORGE_BROWSER_PROFILE_DIR=/tmp/forge-browser-profile",
		"FORGE_INPUT_COMMIT_SHA=" + sha,
		"FORGE_INPUT_BUNDLE=/control/input/repo.bundle",
		"HOME=/home/forge",
		"TMPDIR=/tmp",
	}, WorkerEnv(d, sha))
	for _, kv := range WorkerEnv(d, sha) {
		assert.NotContains(t, kv, d.Lease.FencingToken, "the fencing token is a credential: never in the task's environment")
	}
}

// fakeCreator is a workerAPI whose answers are scripted per call.
type fakeCreator struct {
	creates  int
	inspects int
	errs     []error // returned by successive creates; nil means success
	existing container.InspectResponse
	volumes  map[string]struct{} // the image's VOLUMEs
	host     *container.HostConfig
	cfg      *container.Config
}

func (f *fakeCreator) ContainerCreate(_ context.Context, cfg *container.Config, host *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, _ string) (container.CreateResponse, error) {
	f.creates++
	f.host, f.cfg = host, cfg
	if f.creates <= len(f.errs) && f.errs[f.creates-1] != nil {
		return container.CreateResponse{}, f.errs[f.creates-1]
	}
	return container.CreateResponse{ID: "created-id"}, nil
}

func (f *fakeCreator) ImageInspect(context.Context, string, ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.inspects++
	if f.volumes == nil {
		return image.InspectResponse{ID: "sha256:image"}, nil
	}
	return image.InspectResponse{ID: "sha256:image", Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Volumes: f.volumes}}}, nil
}

func (f *fakeCreator) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	if f.existing.ContainerJSONBase == nil {
		return container.InspectResponse{}, cerrdefs.ErrNotFound
	}
	return f.existing, nil
}

func TestCreateWorkerValidatesSpec(t *testing.T) {
	c := newClient(fastOptions(), &fakeCreator{})
	for name, mutate := range map[string]func(*WorkerSpec){
		"no name":      func(s *WorkerSpec) { s.Name = "" },
		"no volume":    func(s *WorkerSpec) { s.SecretsVolume = "" },
		"relative dir": func(s *WorkerSpec) { s.WorkingDir = "workspace" },
		"no memory":    func(s *WorkerSpec) { s.Resources.WorkerMemoryLimitBytes = 0 },
		"cache outside HOME": func(s *WorkerSpec) {
			s.Caches = []CacheMount{{Volume: "v", Target: "/workspace/.npm"}}
		},
		"cache over HOME":         func(s *WorkerSpec) { s.Caches = []CacheMount{{Volume: "v", Target: "/home/forge/"}} },
		"cache unclean":           func(s *WorkerSpec) { s.Caches = []CacheMount{{Volume: "v", Target: "/home/forge/../etc"}} },
		"cache no volume":         func(s *WorkerSpec) { s.Caches = []CacheMount{{Target: "/home/forge/.npm"}} },
		"hosts without a network": func(s *WorkerSpec) { s.Hosts = []HostAlias{{Alias: "postgres", Container: "c"}} },
	} {
		spec := testSpec()
		mutate(&spec)
		_, err := c.CreateWorker(context.Background(), spec)
		assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err), name)
	}
}

func TestWorkerContainerConfigMountsCaches(t *testing.T) {
	spec := testSpec()
	spec.Caches = []CacheMount{
		{Volume: "forge-x-cache-npm", Target: "/home/forge/.npm"},
		{Volume: "forge-cache-0123456789abcdef-pip", Target: "/home/forge/.pip-cache", ReadOnly: true},
	}
	_, host, _ := WorkerContainerConfig(spec)
	mounts := host.Mounts[len(host.Mounts)-2:]
	assert.Equal(t, mount.Mount{Type: mount.TypeVolume, Source: "forge-x-cache-npm", Target: "/home/forge/.npm"}, mounts[0],
		"per-attempt: read-write, with the copy-up that gives a plain volume the worker's owner")
	assert.Equal(t, mount.Mount{Type: mount.TypeVolume, Source: "forge-cache-0123456789abcdef-pip", Target: "/home/forge/.pip-cache",
		ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}, mounts[1], "read-only, never copied into")
	_, err := newClient(fastOptions(), &fakeCreator{}).CreateWorker(context.Background(), spec)
	assert.NoError(t, err)
}

func TestCreateWorkerAdoptsOwnContainerAfterRetry(t *testing.T) {
	spec := testSpec()
	existing := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "earlier-id"},
		Config:            &container.Config{Labels: map[string]string{"dev.forge.managed": "true", "from.image": "x"}},
	}
	f := &fakeCreator{errs: []error{cerrdefs.ErrUnavailable, cerrdefs.ErrConflict}, existing: existing}
	id, err := newClient(fastOptions(), f).CreateWorker(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, "earlier-id", id)
	assert.Equal(t, 2, f.creates)

	// A conflict on the first attempt is someone else's container.
	f = &fakeCreator{errs: []error{cerrdefs.ErrConflict}, existing: existing}
	_, err = newClient(fastOptions(), f).CreateWorker(context.Background(), spec)
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err))
	assert.True(t, cerrdefs.IsConflict(err))
	assert.Equal(t, 1, f.creates)

	// A retried conflict with foreign labels is not adopted.
	existing.Config.Labels = map[string]string{"dev.forge.managed": "false"}
	f = &fakeCreator{errs: []error{cerrdefs.ErrUnavailable, cerrdefs.ErrConflict}, existing: existing}
	_, err = newClient(fastOptions(), f).CreateWorker(context.Background(), spec)
	assert.True(t, cerrdefs.IsConflict(err))
	assert.Equal(t, 2, f.creates)
}

func TestWorkerContainerConfigOnOpenNetworkResolvesThroughTheEngine(t *testing.T) {
	spec := testSpec()
	spec.Network, spec.OpenNetwork = "forge-x", true
	_, host, _ := WorkerContainerConfig(spec)
	assert.Equal(t, container.NetworkMode("forge-x"), host.NetworkMode)
	assert.Empty(t, host.DNS, "open_public: the engine's resolver")
	assert.Equal(t, "1", host.Sysctls["net.ipv6.conf.all.disable_ipv6"])
}

func TestEgressContainerConfigIsHardened(t *testing.T) {
	spec := EgressSpec{Name: "forge-x-egress", Image: "sha256:" + strings.Repeat("a", 64), EgressNetwork: "forge-x-egress",
		AttemptNetwork: "forge-x", Alias: "egress", UID: 13, RunDir: "/run/forge-egress", Config: "http_port 3128\n",
		Labels: map[string]string{"a": "b"}, SecurityOpts: []string{"apparmor=x"}, MemoryBytes: 256 << 20,
		Guard: NetGuard{Name: "forge-x-guard-egress", Image: "sha256:" + strings.Repeat("a", 64), Rules: "table inet forge_guard {}\n"}}
	require.NoError(t, spec.validate())
	sidecar, err := spec.Sidecar()
	require.NoError(t, err)
	require.NotNil(t, sidecar.Guard, "the proxy is guarded before CreateSidecar returns")
	assert.Equal(t, spec.Guard, *sidecar.Guard)
	cfg, host, net := EgressContainerConfig(spec)
	assert.Equal(t, "13:13", cfg.User)
	assert.Equal(t, container.NetworkMode("forge-x-egress"), host.NetworkMode)
	assert.Contains(t, net.EndpointsConfig, "forge-x-egress")
	assert.Len(t, net.EndpointsConfig, 1, "the attempt network is joined before the start")
	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Empty(t, host.CapAdd)
	assert.Equal(t, []string{"no-new-privileges", "apparmor=x"}, host.SecurityOpt)
	assert.Equal(t, int64(256<<20), host.Memory)
	assert.Equal(t, host.Memory, host.MemorySwap)
	assert.Equal(t, "json-file", host.LogConfig.Type)
	assert.Equal(t, "1m", host.LogConfig.Config["max-size"])
	assert.Contains(t, cfg.Env, "FORGE_EGRESS_CONF=http_port 3128\n")
	for _, opts := range host.Tmpfs {
		assert.Contains(t, opts, "noexec")
	}
	spec.UID = 0
	assert.Error(t, spec.validate())
	spec.UID, spec.Guard.Rules = 13, ""
	assert.Error(t, spec.validate(), "no proxy without its guard")
}

func TestNetGuardContainerHasOnlyNetAdminInTheTargetNamespace(t *testing.T) {
	cfg, host := NetGuardContainerConfig(NetGuard{Name: "g", Image: "img", Rules: "r", SecurityOpts: []string{"apparmor=x"}}, "abc")
	assert.Equal(t, container.NetworkMode("container:abc"), host.NetworkMode)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Equal(t, []string{"NET_ADMIN"}, []string(host.CapAdd))
	assert.Equal(t, []string{"no-new-privileges", "apparmor=x"}, host.SecurityOpt)
	assert.True(t, host.ReadonlyRootfs)
	assert.Empty(t, host.Mounts)
	assert.True(t, cfg.OpenStdin && cfg.StdinOnce, "the rules come on stdin, never in an argument")
	assert.NotContains(t, strings.Join(cfg.Entrypoint, " "), "r\n")
}

func TestWorkerContainerConfigJoinsTheGuardedHolder(t *testing.T) {
	spec := testSpec()
	spec.Network, spec.OpenNetwork, spec.NetnsContainer = "forge-x", true, "holder"
	require.NoError(t, spec.validate())
	_, host, net := WorkerContainerConfig(spec)
	assert.Equal(t, container.NetworkMode("container:holder"), host.NetworkMode)
	assert.Empty(t, host.DNS)
	assert.Empty(t, host.Sysctls, "the holder's namespace has IPv6 off")
	assert.Empty(t, net.EndpointsConfig)
	spec.OpenNetwork = false
	assert.Error(t, spec.validate(), "only an open_public worker joins a holder")
	spec.OpenNetwork, spec.NetnsContainer = true, ""
	assert.Error(t, spec.validate(), "no open_public worker without its guarded holder")
}

// The image's VOLUME paths get a tmpfs of the worker's scratch size unless
// a mount of the worker covers them; a VOLUME / is refused.
func TestCreateWorkerCoversImageVolumes(t *testing.T) {
	f := &fakeCreator{volumes: map[string]struct{}{"/data/": {}, "/workspace": {}, "/tmp": {}, "/var/lib/db": {}}}
	_, err := newClient(fastOptions(), f).CreateWorker(context.Background(), testSpec())
	require.NoError(t, err)
	want := scratchTmpfsOptions(ScratchTmpfsBytes(512<<20), "0755", messages.ImageUser)
	assert.Equal(t, want, f.host.Tmpfs["/data"])
	assert.Equal(t, want, f.host.Tmpfs["/var/lib/db"])
	assert.Contains(t, f.host.Tmpfs["/tmp"], "mode=1777", "the scratch /tmp stays as it is")
	assert.NotContains(t, f.host.Tmpfs, "/workspace", "the workspace volume covers it")

	f = &fakeCreator{volumes: map[string]struct{}{"/": {}}}
	_, err = newClient(fastOptions(), f).CreateWorker(context.Background(), testSpec())
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err))
	assert.Zero(t, f.creates)
}

// TestCreateWorkerAsksAnImageIDsFactsOnce: the VOLUMEs and ENV of an
// image named by its ID are asked of the engine once per client (and the
// clients derived from it); an image named by a tag is asked every time.
func TestCreateWorkerAsksAnImageIDsFactsOnce(t *testing.T) {
	f := &fakeCreator{volumes: map[string]struct{}{"/data": {}}}
	c := newClient(fastOptions(), f)
	spec := testSpec()
	spec.Image = "sha256:" + strings.Repeat("ab", 32)
	for _, client := range []*Client{c, c, c.WithVolumeImages(nil)} {
		_, err := client.CreateWorker(context.Background(), spec)
		require.NoError(t, err)
		assert.Contains(t, f.host.Tmpfs, "/data", "the cached facts still cover the image's VOLUME")
	}
	assert.Equal(t, 3, f.creates)
	assert.Equal(t, 1, f.inspects)

	spec.Image = "forge-agent:latest"
	for range 2 {
		_, err := c.CreateWorker(context.Background(), spec)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, f.inspects, "a tag may move: asked each time")
}

// TestCreateWorkerWithSandboxEtcLeavesNetworkNoneToTheRuntime: with
// WithSandboxEtc, a worker on network none is created without a network
// sandbox (NetworkDisabled) and with the engine's /etc files for network
// none mounted read-only from the host directory, still with network mode
// none and the loopback nameserver; under gVisor, on an attempt network
// or without WithSandboxEtc the engine makes its sandbox as before.
func TestCreateWorkerWithSandboxEtcLeavesNetworkNoneToTheRuntime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandbox-etc")
	for name, tc := range map[string]struct {
		etc      bool
		mutate   func(*WorkerSpec)
		disabled bool
	}{
		"network none":    {etc: true, disabled: true},
		"no sandbox etc":  {},
		"gVisor":          {etc: true, mutate: func(s *WorkerSpec) { s.Runtime, s.GVisor = "runsc", true }},
		"attempt network": {etc: true, mutate: func(s *WorkerSpec) { s.Network = "forge-net" }},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCreator{}
			c := newClient(fastOptions(), f)
			if tc.etc {
				var err error
				c, err = c.WithSandboxEtc(dir)
				require.NoError(t, err)
			}
			spec := testSpec()
			if tc.mutate != nil {
				tc.mutate(&spec)
			}
			_, err := c.CreateWorker(context.Background(), spec)
			require.NoError(t, err)
			assert.Equal(t, tc.disabled, f.cfg.NetworkDisabled)
			var binds []mount.Mount
			for _, m := range f.host.Mounts {
				if m.Type == mount.TypeBind {
					binds = append(binds, m)
				}
			}
			if !tc.disabled {
				assert.Empty(t, binds)
				return
			}
			assert.Equal(t, []mount.Mount{
				{Type: mount.TypeBind, Source: filepath.Join(dir, "hosts"), Target: "/etc/hosts", ReadOnly: true},
				{Type: mount.TypeBind, Source: filepath.Join(dir, "resolv.conf"), Target: "/etc/resolv.conf", ReadOnly: true},
			}, binds)
			assert.Equal(t, container.NetworkMode("none"), f.host.NetworkMode)
			assert.Equal(t, []string{SandboxNameserver}, f.host.DNS)
		})
	}
	hosts, err := os.ReadFile(filepath.Join(dir, "hosts"))
	require.NoError(t, err)
	assert.Contains(t, string(hosts), "127.0.0.1\tlocalhost\n")
	resolv, err := os.ReadFile(filepath.Join(dir, "resolv.conf"))
	require.NoError(t, err)
	assert.Equal(t, "nameserver 127.0.0.1\n", string(resolv))
	for _, p := range []string{dir, filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")} {
		info, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), info.Mode().Perm()&^0o111, p)
	}
	_, err = newClient(fastOptions(), &fakeCreator{}).WithSandboxEtc("relative")
	assert.Error(t, err)
}

// TestGVisorWorkerPIDsCountTheSandboxKernel: under gVisor the container's
// pids limit leaves room for the sandbox kernel's host threads and the
// ptrace stubs, so the task keeps about its dispatch's budget; under runc
// it is the budget itself.
func TestGVisorWorkerPIDsCountTheSandboxKernel(t *testing.T) {
	spec := testSpec()
	_, host, _ := WorkerContainerConfig(spec)
	assert.Equal(t, int64(256), *host.PidsLimit)
	spec.Runtime, spec.GVisor = "runsc", true
	_, host, _ = WorkerContainerConfig(spec)
	assert.Equal(t, "runsc", host.Runtime)
	assert.Equal(t, GVisorPIDsLimit(256), *host.PidsLimit)
	assert.Equal(t, int64(64+10*256), *host.PidsLimit)
	assert.Greater(t, GVisorPIDsLimit(1), int64(32), "runsc does not start under 32")
}

// TestCreateWorkerWritesItsSidecarsIntoHosts: with Hosts, the worker's
// ExtraHosts map each alias to the container's address on the worker's
// network; a container without one fails the create before it is tried.
func TestCreateWorkerWritesItsSidecarsIntoHosts(t *testing.T) {
	f := &fakeCreator{existing: container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "sidecar"},
		NetworkSettings: &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{
			"forge-x-net": {IPAddress: "172.30.0.3"}, "forge-x-net-egress": {IPAddress: "172.31.0.2"},
		}},
	}}
	c := newClient(fastOptions(), f)
	spec := testSpec()
	spec.Network = "forge-x-net"
	spec.Hosts = []HostAlias{{Alias: "postgres", Container: "forge-x-postgres"}}
	_, err := c.CreateWorker(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, []string{"postgres:172.30.0.3"}, f.host.ExtraHosts, "the address on the worker's network, not the egress one")

	f2 := &fakeCreator{existing: container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "sidecar"}, NetworkSettings: &container.NetworkSettings{}}}
	_, err = newClient(fastOptions(), f2).CreateWorker(context.Background(), spec)
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err))
	assert.Zero(t, f2.creates)
}
