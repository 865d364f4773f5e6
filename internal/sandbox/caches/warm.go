package caches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// WarmAPI is the part of the Engine API a warm-up needs.
type WarmAPI interface {
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig,
		networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerAttach(ctx context.Context, container string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerWait(ctx context.Context, container string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
}

// LabelWarmup marks a warm-up container with the volume it fills.
const LabelWarmup = "dev.forge.cache-warmup"

// Warm-up defaults and bounds.
const (
	DefaultWarmTimeout     = 30 * time.Minute
	DefaultWarmMemoryBytes = 2 << 30
	warmPIDs               = 1024
	warmTmpfs              = "rw,nosuid,nodev,exec,size=1g"
)

// WarmRequest is one operator-approved warm-up.
type WarmRequest struct {
	Project string // the project, as its dispatches name it (repo.name)
	Cache   string // npm, pnpm, yarn, nuget, cargo or pip
	Image   string // the toolchain image the command runs in (never pulled)
	Command []string
	// Network is "none" (the default: the command sees no network) or
	// "bridge" (the engine's default bridge, for a command that downloads).
	Network     string
	Timeout     time.Duration // the whole warm-up; default DefaultWarmTimeout
	MemoryBytes int64         // default DefaultWarmMemoryBytes
	Output      io.Writer     // the command's stdout and stderr (nil: discarded)
}

// WarmReport is what a warm-up did.
type WarmReport struct {
	Volume   string `json:"volume"`
	Project  string `json:"project"`
	Cache    string `json:"cache"`
	ExitCode int64  `json:"exitCode"` // -1 when the command did not run to its end
}

func (r WarmRequest) validate() error {
	switch {
	case r.Project == "":
		return errors.New("a warm-up needs a project")
	case r.Image == "":
		return errors.New("a warm-up needs a toolchain image")
	case len(r.Command) == 0 || r.Command[0] == "":
		return errors.New("a warm-up needs a command")
	case r.Network != "" && r.Network != "none" && r.Network != "bridge":
		return fmt.Errorf("warm-up network %q is not none or bridge", r.Network)
	}
	if _, ok := Target(r.Cache); !ok {
		return fmt.Errorf("cache %q is not one of npm, pnpm, yarn, nuget, cargo, pip", r.Cache)
	}
	return nil
}

// Warm fills the project's read-only cache: it creates the volume (or
// reuses it when it carries exactly the project cache's labels), then runs
// Command in Image with the volume mounted read-write where the worker
// will see it and the tool's variables set (Env), and removes the
// container. The command runs as root inside a container with every
// capability dropped, no-new-privileges, a read-only root filesystem
// (tmpfs /tmp and HOME) and bounded memory and PIDs, so the files it
// writes belong to root: the worker's uid can read them, never write them.
// A non-zero exit is an error; the volume keeps what was written.
func Warm(ctx context.Context, api WarmAPI, req WarmRequest) (report WarmReport, err error) {
	if err := req.validate(); err != nil {
		return WarmReport{Cache: req.Cache, ExitCode: -1}, err
	}
	if req.Timeout <= 0 {
		req.Timeout = DefaultWarmTimeout
	}
	if req.MemoryBytes <= 0 {
		req.MemoryBytes = DefaultWarmMemoryBytes
	}
	if req.Network == "" {
		req.Network = "none"
	}
	if req.Output == nil {
		req.Output = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	name, labels := ProjectVolume(req.Project, req.Cache), ProjectLabels(req.Project, req.Cache)
	report = WarmReport{Volume: name, Project: dockerops.LabelValue(req.Project), Cache: req.Cache, ExitCode: -1}
	v, err := api.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels})
	if err != nil {
		return report, fmt.Errorf("volume create %s: %w", name, err)
	}
	if !maps.Equal(v.Labels, labels) {
		return report, fmt.Errorf("volume %s already exists with other labels; it is not this project's cache: %w", name, cerrdefs.ErrConflict)
	}
	target, _ := Target(req.Cache)
	pids := int64(warmPIDs)
	cfg := &container.Config{
		Image:        req.Image,
		User:         "0:0",
		Entrypoint:   req.Command[:1],
		Cmd:          req.Command[1:],
		Env:          append([]string{"HOME=" + messages.HomeDir, "TMPDIR=/tmp"}, Env([]contract.Cache{{Name: req.Cache, Mode: contract.CacheReadOnly}})...),
		WorkingDir:   "/tmp",
		Labels:       map[string]string{LabelWarmup: name, dockerops.LabelProject: labels[dockerops.LabelProject]},
		AttachStdout: true,
		AttachStderr: true,
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(req.Network),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Tmpfs:          map[string]string{"/tmp": warmTmpfs, messages.HomeDir: warmTmpfs},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}}},
		Resources: container.Resources{Memory: req.MemoryBytes, MemorySwap: req.MemoryBytes, PidsLimit: &pids},
	}
	created, err := api.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if err != nil {
		return report, fmt.Errorf("create the warm-up container: %w", err)
	}
	defer func() {
		// Removed on a context that survives the caller's cancellation.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer rcancel()
		if rerr := api.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			err = errors.Join(err, fmt.Errorf("remove the warm-up container: %w", rerr))
		}
	}()
	hijack, err := api.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return report, fmt.Errorf("attach to the warm-up container: %w", err)
	}
	defer hijack.Close()
	copied := make(chan error, 1)
	go func() {
		_, cerr := stdcopy.StdCopy(req.Output, req.Output, hijack.Reader)
		copied <- cerr
	}()
	waitCh, waitErr := api.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return report, fmt.Errorf("start the warm-up: %w", err)
	}
	select {
	case res := <-waitCh:
		report.ExitCode = res.StatusCode
	case werr := <-waitErr:
		return report, fmt.Errorf("wait for the warm-up: %w", werr)
	case <-ctx.Done():
		return report, fmt.Errorf("warm-up did not finish within %s: %w", req.Timeout, ctx.Err())
	}
	select { // the output drains once the container's streams close
	case <-copied:
	case <-ctx.Done():
	}
	if report.ExitCode != 0 {
		return report, fmt.Errorf("the warm-up command exited %d", report.ExitCode)
	}
	return report, nil
}
