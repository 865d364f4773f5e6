package dockerops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func serviceSpec() ServiceSpec {
	return ServiceSpec{
		Name: "forge-abc-postgres", Image: "sha256:abc", Network: "forge-abc", Alias: "postgres",
		User: "999:999", Cmd: []string{"/bin/sh", "-ec", "exec postgres"}, Labels: map[string]string{LabelManaged: "true"},
		Tmpfs:         map[string]string{"/var/lib/postgresql/data": "rw,noexec,size=512m,uid=999,gid=999,mode=0700"},
		SecretsVolume: "forge-abc-secrets", MemoryBytes: 1 << 30, NanoCPUs: 1e9, PIDs: 256,
		SecurityOpts: []string{"apparmor=forge"},
	}
}

func TestServiceContainerIsHardenedAndOnlyOnTheAttemptNetwork(t *testing.T) {
	cfg, host, net := ServiceContainerConfig(serviceSpec())
	assert.Equal(t, "999:999", cfg.User)
	assert.Equal(t, "sha256:abc", cfg.Image)
	assert.Empty(t, cfg.Entrypoint, "the image's entrypoint is never used")
	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Empty(t, host.CapAdd)
	assert.Equal(t, []string{"no-new-privileges", "apparmor=forge"}, host.SecurityOpt)
	assert.True(t, *host.Init)
	assert.Equal(t, "none", host.LogConfig.Type)
	assert.Equal(t, int64(1<<30), host.Memory)
	assert.Equal(t, host.Memory, host.MemorySwap, "no swap")
	require.NotNil(t, host.PidsLimit)
	assert.Equal(t, int64(256), *host.PidsLimit)
	assert.Equal(t, "forge-abc", string(host.NetworkMode))
	assert.Equal(t, isolatedSysctls, host.Sysctls)
	assert.Equal(t, []string{SandboxNameserver}, host.DNS)
	require.Len(t, host.Mounts, 1)
	assert.True(t, host.Mounts[0].ReadOnly, "the secrets volume is read-only for services")
	assert.Equal(t, SecretsDir, host.Mounts[0].Target)
	require.Len(t, net.EndpointsConfig, 1)
	assert.Equal(t, []string{"postgres"}, net.EndpointsConfig["forge-abc"].Aliases)
	assert.Empty(t, host.PortBindings, "nothing is published on the host")
	assert.Empty(t, host.Runtime, "the engine's default runtime unless the spec names one")

	gvisor := serviceSpec()
	gvisor.Runtime = "runsc-net"
	_, host, _ = ServiceContainerConfig(gvisor)
	assert.Equal(t, "runsc-net", host.Runtime)
	assert.True(t, host.ReadonlyRootfs, "the same hardening under another runtime")
}

func TestServiceSpecRefusesRootAndMissingLimits(t *testing.T) {
	for name, mutate := range map[string]func(*ServiceSpec){
		"root":       func(s *ServiceSpec) { s.User = "0:0" },
		"root name":  func(s *ServiceSpec) { s.User = "root" },
		"no user":    func(s *ServiceSpec) { s.User = "" },
		"no memory":  func(s *ServiceSpec) { s.MemoryBytes = 0 },
		"no pids":    func(s *ServiceSpec) { s.PIDs = 0 },
		"no network": func(s *ServiceSpec) { s.Network = "" },
	} {
		t.Run(name, func(t *testing.T) {
			s := serviceSpec()
			mutate(&s)
			assert.Error(t, s.validate())
		})
	}
	assert.NoError(t, serviceSpec().validate())
}

func TestProbeContainerIsHardenedAndHasNoAlias(t *testing.T) {
	cfg, host, net := ProbeContainerConfig(ProbeSpec{Name: "forge-abc-probe-postgres", Image: "sha256:agent", Network: "forge-abc",
		SecretsVolume: "forge-abc-secrets", Cmd: []string{"/opt/forge/forged", "worker", "probe"}})
	assert.Equal(t, []string{"/opt/forge/forged", "worker", "probe"}, []string(cfg.Entrypoint))
	assert.Equal(t, "10001:10001", cfg.User)
	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(host.CapDrop))
	assert.Equal(t, int64(probeMemoryBytes), host.Memory)
	assert.Empty(t, net.EndpointsConfig["forge-abc"].Aliases)
}

func TestServiceSpecCarriesItsGuard(t *testing.T) {
	s := serviceSpec()
	sc, err := s.Sidecar()
	require.NoError(t, err)
	assert.Nil(t, sc.Guard)
	s.Guard = &NetGuard{Name: "forge-abc-guard-postgres", Image: "img", Rules: "r"}
	sc, err = s.Sidecar()
	require.NoError(t, err)
	assert.Equal(t, s.Guard, sc.Guard, "guarded before CreateSidecar returns")
}
