package preflight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/system"
)

// fakeEngine answers like an engine; a nil error field means success, and
// block makes every call wait for its context.
type fakeEngine struct {
	info                         system.Info
	ping                         types.Ping
	version                      types.Version
	pingErr, infoErr, versionErr error
	block                        bool
	calls                        atomic.Int32
}

func (f *fakeEngine) wait(ctx context.Context) error {
	f.calls.Add(1)
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeEngine) Ping(ctx context.Context) (types.Ping, error) {
	if err := f.wait(ctx); err != nil {
		return types.Ping{}, err
	}
	return f.ping, f.pingErr
}

func (f *fakeEngine) Info(ctx context.Context) (system.Info, error) {
	if err := f.wait(ctx); err != nil {
		return system.Info{}, err
	}
	return f.info, f.infoErr
}

func (f *fakeEngine) ServerVersion(ctx context.Context) (types.Version, error) {
	if err := f.wait(ctx); err != nil {
		return types.Version{}, err
	}
	return f.version, f.versionErr
}

// rootlessEngine is a healthy rootless Linux engine.
func rootlessEngine() *fakeEngine {
	return &fakeEngine{
		ping: types.Ping{APIVersion: "1.47", OSType: "linux", BuilderVersion: build.BuilderBuildKit},
		info: system.Info{
			OSType: "linux", ServerVersion: "27.3.1", Driver: "overlay2", CgroupVersion: "2", CgroupDriver: "systemd",
			DockerRootDir: "/home/u/.local/share/docker", NCPU: 16, MemTotal: 64 << 30,
			DriverStatus:    [][2]string{{"Backing Filesystem", "xfs"}, {"Supports project quota", "true"}},
			SecurityOptions: []string{"name=seccomp,profile=builtin", "name=rootless", "name=cgroupns", "name=apparmor"},
		},
		version: types.Version{Version: "27.3.1", APIVersion: "1.47", MinAPIVersion: "1.24"},
	}
}

// rootfulEngine is a healthy rootful Linux engine.
func rootfulEngine() *fakeEngine {
	e := rootlessEngine()
	e.ping.BuilderVersion = build.BuilderV1
	e.info.DockerRootDir = "/var/lib/docker"
	e.info.SecurityOptions = []string{"name=apparmor", "name=seccomp,profile=default"}
	e.info.DriverStatus = [][2]string{{"Backing Filesystem", "extfs"}}
	return e
}

// fakeHost is a host with settable facts; disks maps a path to its
// {total, free}, and a path missing from it fails to measure.
type fakeHost struct {
	mu       sync.Mutex
	goos     string
	memory   int64
	memErr   error
	cores    int
	disks    map[string][2]int64
	measured []string
}

func bigHost() *fakeHost {
	return &fakeHost{
		goos: "linux", memory: 32 << 30, cores: 16,
		disks: map[string][2]int64{
			"/var/lib/docker": {1000 << 30, 500 << 30}, "/home/u/.local/share/docker": {1000 << 30, 500 << 30},
			"/state": {200 << 30, 100 << 30},
		},
	}
}

func (h *fakeHost) Platform() (string, string) { return h.goos, "amd64" }

func (h *fakeHost) AvailableMemory() (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memory, h.memErr
}

func (h *fakeHost) CPUCores() int { return h.cores }

func (h *fakeHost) DiskUsage(path string) (int64, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.measured = append(h.measured, path)
	d, ok := h.disks[path]
	if !ok {
		return 0, 0, errors.New("no such filesystem")
	}
	return d[0], d[1], nil
}

func (h *fakeHost) setDisk(path string, total, free int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disks[path] = [2]int64{total, free}
}
