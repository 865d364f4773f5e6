package preflight

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/quota"
)

func check(t *testing.T, engine Engine, host HostFacts, opts Options) Report {
	t.Helper()
	if opts.StateRoot == "" {
		opts.StateRoot = "/state"
	}
	if opts.DetectStorage == nil { // deterministic, whatever this host offers
		opts.DetectStorage = func(bool) quota.Facts { return quota.Facts{Mechanism: quota.MechanismNone, Reason: "test"} }
	}
	r := NewChecker(engine, host, opts).Check(context.Background())
	assert.Equal(t, r.Code == "", r.Available, "available iff no code")
	if !r.Available {
		assert.Zero(t, r.Slots())
		assert.NotEmpty(t, r.Reason)
		assert.True(t, failure.Is(r.Err(), r.Code))
	}
	return r
}

func TestCheckRootlessEngine(t *testing.T) {
	r := check(t, rootlessEngine(), bigHost(), Options{Endpoint: "unix:///run/user/1000/docker.sock"})
	require.True(t, r.Available, r.Reason)
	assert.Equal(t, 3, r.Slots())
	assert.True(t, r.MaintenanceAllowed())
	assert.True(t, r.RootlessRequired)
	assert.Equal(t, Platform{OS: "linux", Arch: "amd64", Supported: true}, r.Platform)
	assert.Equal(t, "1.47", r.Engine.APIVersion)
	assert.Equal(t, "27.3.1", r.Engine.ServerVersion)
	assert.True(t, r.Engine.Linux && r.Engine.Reachable)
	f := r.Features
	assert.True(t, f.Rootless && f.UserNamespaces && f.Seccomp && f.StorageQuota && f.BuildKit && f.ClassicBuilder)
	assert.Equal(t, "2", f.CgroupVersion)
	assert.Equal(t, "builtin", f.SeccompProfile)
	assert.Equal(t, []string{"apparmor"}, f.LSM)
	assert.Equal(t, "/home/u/.local/share/docker", r.Disk.Path)
	assert.Equal(t, int64(500<<30), r.Disk.FreeBytes)
	assert.Equal(t, 14, r.Memory.Slots) // (32-2) GiB / 2.125 GiB
	assert.Equal(t, 7, r.CPU.Slots)     // 15 cores * 1000 / 2000
}

func TestCheckUnreachable(t *testing.T) {
	e := rootlessEngine()
	e.pingErr = errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\nIs the docker daemon running?")
	r := check(t, e, bigHost(), Options{Endpoint: "unix:///var/run/docker.sock"})
	assert.Equal(t, DockerUnreachable, r.Code)
	assert.Equal(t, "docker ping at unix:///var/run/docker.sock: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", r.Reason)
	assert.False(t, r.Engine.Reachable)
	assert.False(t, r.MaintenanceAllowed())
	assert.Equal(t, int32(1), e.calls.Load(), "nothing after a failed ping")

	e = rootlessEngine()
	e.infoErr = errors.New("500 internal")
	r = check(t, e, bigHost(), Options{})
	assert.Equal(t, DockerUnreachable, r.Code)
	assert.Contains(t, r.Reason, "docker info: 500 internal")

	r = check(t, nil, bigHost(), Options{})
	assert.Equal(t, DockerUnreachable, r.Code)
}

func TestCheckCallDeadline(t *testing.T) {
	e := rootlessEngine()
	e.block = true
	start := time.Now()
	r := check(t, e, bigHost(), Options{CallTimeout: 50 * time.Millisecond})
	assert.Equal(t, DockerUnreachable, r.Code)
	assert.Contains(t, r.Reason, context.DeadlineExceeded.Error())
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestCheckNonLinuxEngine(t *testing.T) {
	e := rootlessEngine()
	e.info.OSType = "windows"
	e.info.DockerRootDir = `C:\ProgramData\docker`
	r := check(t, e, bigHost(), Options{AllowRootful: true})
	assert.Equal(t, DockerLinuxRequired, r.Code)
	assert.Contains(t, r.Reason, `runs "windows" containers`)
	assert.True(t, r.Engine.Reachable)
	assert.False(t, r.Engine.Linux)
	assert.False(t, r.MaintenanceAllowed())
	assert.Equal(t, "/state", r.Disk.Path, "a non-Linux root dir is not measured")
}

func TestCheckRootfulEngine(t *testing.T) {
	r := check(t, rootfulEngine(), bigHost(), Options{Endpoint: "unix:///var/run/docker.sock"})
	assert.Equal(t, DockerRootlessRequired, r.Code)
	assert.Contains(t, r.Reason, "runs rootful")
	assert.False(t, r.MaintenanceAllowed())
	assert.False(t, r.Features.Rootless)
	assert.Equal(t, "/var/lib/docker", r.Disk.Path, "resources are still measured for the operator")
	assert.Equal(t, 7, r.CPU.Slots)

	r = check(t, rootfulEngine(), bigHost(), Options{AllowRootful: true})
	require.True(t, r.Available, r.Reason)
	assert.False(t, r.RootlessRequired)
	assert.Equal(t, 3, r.Slots())
	assert.False(t, r.Features.BuildKit)
	assert.False(t, r.Features.StorageQuota)
	assert.Equal(t, "1", r.Features.BuilderVersion)

	r = check(t, rootfulEngine(), bigHost(), Options{AllowRootful: true, Capacity: CapacityPolicy{MaxSlots: 5}})
	assert.Equal(t, 5, r.Slots())
	assert.Equal(t, 5, r.MaxSlots)
}

func TestCheckUnsupportedPlatform(t *testing.T) {
	h := bigHost()
	h.goos = "plan9"
	e := rootlessEngine()
	r := check(t, e, h, Options{})
	assert.Equal(t, PlatformUnsupported, r.Code)
	assert.Contains(t, r.Reason, "plan9/amd64")
	assert.Zero(t, e.calls.Load(), "the engine is not asked")
}

func TestCheckDiskPressureLatches(t *testing.T) {
	h := bigHost()
	c := NewChecker(rootlessEngine(), h, Options{StateRoot: "/state"})
	root := "/home/u/.local/share/docker"
	for i, step := range []struct {
		usedGiB int64
		code    failure.Code
	}{{500, ""}, {950, DockerDiskLow}, {850, DockerDiskLow}, {800, ""}, {850, ""}} {
		h.setDisk(root, 1000<<30, (1000-step.usedGiB)<<30)
		r := c.Check(context.Background())
		assert.Equal(t, step.code, r.Code, "step %d", i)
		if step.code == DockerDiskLow {
			assert.Contains(t, r.Reason, root)
			assert.True(t, r.MaintenanceAllowed())
		}
	}
}

func TestCheckDiskFallbacks(t *testing.T) {
	// A remote engine's root directory is not ours to measure.
	h := bigHost()
	r := check(t, rootlessEngine(), h, Options{Endpoint: "tcp://10.0.0.2:2376"})
	assert.Equal(t, "/state", r.Disk.Path)
	assert.Equal(t, []string{"/state"}, h.measured)

	// An unmeasurable root directory falls back to the state root.
	h = bigHost()
	delete(h.disks, "/home/u/.local/share/docker")
	r = check(t, rootlessEngine(), h, Options{})
	assert.Equal(t, "/state", r.Disk.Path)
	assert.True(t, r.Available)

	// Nothing measurable: the disk is low, and the reason says why.
	h = bigHost()
	h.disks = map[string][2]int64{}
	r = check(t, rootlessEngine(), h, Options{})
	assert.Equal(t, DockerDiskLow, r.Code)
	assert.Contains(t, r.Reason, "cannot measure the disk of /state: no such filesystem")
}

func TestCheckMemoryAndCPULow(t *testing.T) {
	h := bigHost()
	h.memory = 3 << 30
	r := check(t, rootlessEngine(), h, Options{})
	assert.Equal(t, DockerMemoryLow, r.Code)
	assert.Contains(t, r.Reason, "3.0 GiB of memory available")
	assert.True(t, r.MaintenanceAllowed())

	h = bigHost()
	h.memErr = errors.New("no meminfo")
	r = check(t, rootlessEngine(), h, Options{})
	assert.Equal(t, DockerMemoryLow, r.Code)
	assert.Contains(t, r.Reason, "no meminfo")

	h = bigHost()
	h.cores = 2
	r = check(t, rootlessEngine(), h, Options{})
	assert.Equal(t, DockerCPULow, r.Code)
	assert.Contains(t, r.Reason, "2 CPU cores with 1 kept for the host leave 1000 millis")
	assert.True(t, r.MaintenanceAllowed())
}

func TestSecurityOptionParsing(t *testing.T) {
	name, kv := securityOption("name=seccomp,profile=default")
	assert.Equal(t, "seccomp", name)
	assert.Equal(t, map[string]string{"profile": "default"}, kv)
	name, _ = securityOption("apparmor")
	assert.Equal(t, "apparmor", name)
	name, _ = securityOption("name=userns")
	assert.Equal(t, "userns", name)
}

func TestCheckReportsTheServiceCatalogue(t *testing.T) {
	images := []ServiceImage{{Service: "postgres", Ref: "forged-services/postgres:t", ImageID: "sha256:a", State: "ready"},
		{Service: "redis", Ref: "forged-services/redis:t", ImageID: "sha256:b", State: "missing"}}
	r := check(t, rootlessEngine(), bigHost(), Options{Services: func(context.Context) []ServiceImage { return images }})
	require.True(t, r.Available, "a missing service image refuses the attempts declaring it, not the host")
	assert.Equal(t, images, r.Services)
	toolchains := []ToolchainImage{{Name: "go", Ref: "forged-images/go:1", ImageID: "sha256:g"}}
	assert.Equal(t, toolchains, check(t, rootlessEngine(), bigHost(), Options{Toolchains: func(context.Context) []ToolchainImage { return toolchains }}).Toolchains)
	withServices := check(t, rootlessEngine(), bigHost(), Options{Capacity: CapacityPolicy{ServiceMemoryBytes: 2 << 30}})
	assert.Equal(t, int64(2<<30)+r.Memory.PerAttemptBytes, withServices.Memory.PerAttemptBytes, "admission counts service memory")
}

// The seed's securityProfile feature: both settings configured, and the
// engine enforces seccomp and the module the LSM option names.
func TestSecurityProfileFeature(t *testing.T) {
	const profile, apparmor = "/etc/forged/seccomp.json", "apparmor=forge-sandbox"
	cases := []struct {
		name         string
		securityOpts []string
		seccomp, lsm string
		want         bool
	}{
		{"both configured, engine enforces both", []string{"name=seccomp,profile=builtin", "name=apparmor"}, profile, apparmor, true},
		{"no settings", []string{"name=seccomp,profile=builtin", "name=apparmor"}, "", "", false},
		{"no seccomp profile", []string{"name=seccomp,profile=builtin", "name=apparmor"}, "", apparmor, false},
		{"no LSM option", []string{"name=seccomp,profile=builtin", "name=apparmor"}, profile, " ", false},
		{"engine without seccomp", []string{"name=apparmor"}, profile, apparmor, false},
		{"engine without the named module", []string{"name=seccomp,profile=builtin", "name=apparmor"}, profile, "label=type:container_t", false},
		{"SELinux option on an SELinux engine", []string{"name=seccomp,profile=builtin", "name=selinux"}, profile, "label=type:container_t", true},
		{"unknown option kind", []string{"name=seccomp,profile=builtin", "name=apparmor"}, profile, "smack=x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := rootlessEngine()
			e.info.SecurityOptions = append([]string{"name=rootless"}, c.securityOpts...)
			r := check(t, e, bigHost(), Options{SeccompProfile: c.seccomp, LSMOption: c.lsm})
			require.True(t, r.Engine.Reachable)
			assert.Equal(t, c.want, r.Features.SecurityProfile)
		})
	}
}
