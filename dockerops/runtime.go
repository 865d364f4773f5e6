package dockerops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/ids"
)

// runtimeProbeLabel marks the probe containers of ProbeRuntime (removed
// with the probe; the reaper's managed labels do not cover them).
const runtimeProbeLabel = "dev.forge.runtime-probe"

// Limits of a runtime probe container. Under runsc the pids cgroup counts
// the sandbox's own host threads and stub processes too: 32 pids is too
// few for runsc to start (measured with Debian's 20221219 release), 64 is
// enough; 128 leaves a margin.
const (
	runtimeProbeMemoryBytes = 64 << 20
	runtimeProbePIDs        = 128
	runtimeProbeTimeout     = 30 * time.Second
)

// RuntimeProbeConfig returns the create configuration of a runtime probe:
// image's dmesg under the OCI runtime named runtime, with no network, a
// read-only root, every capability dropped, no-new-privileges and small
// memory and pids bounds. It runs as root inside the sandbox: reading the
// kernel log needs CAP_SYSLOG in runc's containers, and gVisor's kernel
// gives it to its root without a host capability.
func RuntimeProbeConfig(runtime, image string) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	pids := int64(runtimeProbePIDs)
	stopTimeout := 1
	cfg := &container.Config{
		Image:        image,
		User:         "0:0",
		Entrypoint:   []string{"dmesg"},
		Labels:       map[string]string{runtimeProbeLabel: "true"},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		StopTimeout:  &stopTimeout,
	}
	host := &container.HostConfig{
		Runtime:        runtime,
		NetworkMode:    network.NetworkNone,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     runtimeProbeMemoryBytes,
			MemorySwap: runtimeProbeMemoryBytes,
			PidsLimit:  &pids,
		},
	}
	return cfg, host, &network.NetworkingConfig{}
}

// ProbeRuntime runs a throwaway probe container (RuntimeProbeConfig) to its
// end and removes it, on a context that survives ctx. It returns the
// container's output (its kernel log) and the time from create to exit; it
// makes *Client a preflight.RuntimeProber.
func (c *Client) ProbeRuntime(ctx context.Context, runtime, image string) preflight.RuntimeProbe {
	start := time.Now()
	name := "forge-runtime-probe-" + strings.ReplaceAll(ids.NewUUID(), "-", "")
	cfg, host, net := RuntimeProbeConfig(runtime, image)
	id, err := c.createContainer(ctx, name, cfg.Labels, cfg, host, net)
	if err != nil {
		return preflight.RuntimeProbe{Elapsed: time.Since(start), Err: err}
	}
	defer func() { _ = c.removeHelper(ctx, id) }()
	var log strings.Builder
	collect := func(line []byte) error {
		log.Write(line)
		log.WriteByte('\n')
		return nil
	}
	res, err := c.RunAttached(ctx, id, nil, collect, RunLimits{MaxDuration: runtimeProbeTimeout, MaxStdoutBytes: 64 << 10, MaxStderrBytes: 64 << 10, StderrTailBytes: 1024, StopGrace: time.Second})
	p := preflight.RuntimeProbe{KernelLog: log.String(), Elapsed: time.Since(start), Err: err}
	if err == nil && res.ExitCode != 0 {
		p.Err = fmt.Errorf("the probe exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return p
}
