package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Docker Desktop hosts (macOS, Windows): the engine runs in a Linux VM.
// As the seed does, forged recognises one by the engine's OperatingSystem
// ("Docker Desktop") on a non-Linux host, and then:
//   - measures memory in the VM: its MemTotal minus what the running
//     containers use (a one-shot stats reading of each), not the host's;
//   - measures the disk on forged's state root with statfs (the Docker
//     root directory is inside the VM);
//   - accepts the engine although it is not rootless when the operator
//     allows Docker Desktop (--allow-docker-desktop, or the seed's
//     FORGE_ALLOW_DOCKER_DESKTOP_SANDBOX=true), like the seed's developer
//     mode. Without it, --allow-rootful=false refuses it
//     (docker_rootless_required).
//
// This is tested with fakes only: no real Mac ran it.

// DesktopEnv is the seed's variable that allows a Docker Desktop engine.
const DesktopEnv = "FORGE_ALLOW_DOCKER_DESKTOP_SANDBOX"

// DesktopAllowedByEnv reports whether the seed's variable allows Docker
// Desktop (exactly "true", as the seed reads it).
func DesktopAllowedByEnv() bool { return os.Getenv(DesktopEnv) == "true" }

// isDockerDesktop reports whether the engine is Docker Desktop's VM seen
// from a non-Linux host.
func isDockerDesktop(goos, operatingSystem string) bool {
	return goos != "linux" && strings.Contains(strings.ToLower(operatingSystem), "docker desktop")
}

// ContainerMemory sums the memory the engine's running containers use.
type ContainerMemory func(ctx context.Context) (int64, error)

// engineContainerMemory is ContainerMemory over the Engine API, for an
// engine that is a full client.
func engineContainerMemory(engine Engine) ContainerMemory {
	cli, ok := engine.(*client.Client)
	if !ok {
		return nil
	}
	return func(ctx context.Context) (int64, error) {
		list, err := cli.ContainerList(ctx, container.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("list containers: %w", err)
		}
		var total int64
		for _, c := range list {
			stats, err := cli.ContainerStatsOneShot(ctx, c.ID)
			if err != nil {
				return 0, fmt.Errorf("stats of %s: %w", c.ID, err)
			}
			var s container.StatsResponse
			err = json.NewDecoder(stats.Body).Decode(&s)
			stats.Body.Close()
			if err != nil {
				return 0, fmt.Errorf("stats of %s: %w", c.ID, err)
			}
			total += int64(s.MemoryStats.Usage)
		}
		return total, nil
	}
}

// desktopMemory is the memory available in Docker Desktop's VM: its
// MemTotal minus the containers' usage. ok is false when either is
// unknown; the host's own reading is used then, as the seed does.
func (c *Checker) desktopMemory(ctx context.Context, memTotal int64) (int64, bool) {
	if memTotal <= 0 || c.opts.ContainerMemory == nil {
		return 0, false
	}
	used, err := callEngine(ctx, c.opts.CallTimeout, c.opts.ContainerMemory)
	if err != nil {
		return 0, false
	}
	return max(memTotal-used, 0), true
}
