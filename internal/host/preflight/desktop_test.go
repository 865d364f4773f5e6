package preflight

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// desktopEngine is Docker Desktop's VM engine: rootful, 8 GiB.
func desktopEngine() *fakeEngine {
	e := rootfulEngine()
	e.info.OperatingSystem = "Docker Desktop"
	e.info.MemTotal = 8 << 30
	e.info.DockerRootDir = "/var/lib/docker" // inside the VM: never measured from the Mac
	return e
}

// macHost is a Mac: no host memory reading, the state root on its disk.
func macHost() *fakeHost {
	return &fakeHost{goos: "darwin", memErr: errors.New("host fact not measured on macOS"), cores: 8,
		disks: map[string][2]int64{"/state": {500 << 30, 200 << 30}}}
}

func usage(bytes int64, err error) ContainerMemory {
	return func(context.Context) (int64, error) { return bytes, err }
}

func TestDockerDesktopHost(t *testing.T) {
	// Allowed by the operator (the seed's developer mode): available, its
	// memory the VM's MemTotal minus the containers' usage, its disk the
	// state root's.
	host := macHost()
	r := check(t, desktopEngine(), host, Options{AllowRootful: false, AllowDockerDesktop: true, ContainerMemory: usage(2<<30, nil),
		Capacity: CapacityPolicy{HostReserveBytes: 1 << 30}})
	require.True(t, r.Available, "%s: %s", r.Code, r.Reason)
	assert.True(t, r.Engine.DockerDesktop)
	assert.Equal(t, int64(6<<30), r.Memory.AvailableBytes, "MemTotal 8 GiB minus 2 GiB in use")
	assert.Equal(t, "/state", r.Disk.Path)
	assert.Equal(t, int64(200<<30), r.Disk.FreeBytes)
	assert.NotContains(t, host.measured, "/var/lib/docker", "the VM's root directory is not the Mac's")

	// Not allowed, and rootless required: refused with the seed's code,
	// naming the setting.
	r = check(t, desktopEngine(), macHost(), Options{AllowRootful: false, ContainerMemory: usage(0, nil)})
	assert.Equal(t, DockerRootlessRequired, r.Code)
	assert.Contains(t, r.Reason, DesktopEnv)

	// Containers' usage unknown: the host's reading, which a Mac lacks.
	r = check(t, desktopEngine(), macHost(), Options{AllowDockerDesktop: true, ContainerMemory: usage(0, errors.New("stats refused"))})
	assert.Equal(t, DockerMemoryLow, r.Code)

	// Usage above MemTotal leaves nothing, never a negative amount.
	r = check(t, desktopEngine(), macHost(), Options{AllowDockerDesktop: true, ContainerMemory: usage(9<<30, nil)})
	assert.Equal(t, DockerMemoryLow, r.Code)
	assert.Zero(t, r.Memory.AvailableBytes)

	// A Linux host is never Docker Desktop, whatever the engine says.
	r = check(t, desktopEngine(), bigHost(), Options{AllowDockerDesktop: true, ContainerMemory: usage(7<<30, nil)})
	assert.False(t, r.Engine.DockerDesktop)
	assert.Equal(t, int64(32<<30), r.Memory.AvailableBytes)
}

func TestDesktopAllowedByEnv(t *testing.T) {
	t.Setenv(DesktopEnv, "true")
	assert.True(t, DesktopAllowedByEnv())
	t.Setenv(DesktopEnv, "1")
	assert.False(t, DesktopAllowedByEnv(), "exactly true, as the seed reads it")
}
