package dockerops

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// workerAPI is the part of the engine API that creates the worker (and
// the other containers made from the agent image, whose VOLUMEs it reads).
type workerAPI interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig,
		networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
}

// Mount points and limits of the worker container.
const (
	SecretsDir = "/run/forge-secrets"

	workerStopTimeoutSeconds = 10
	workerNoFile             = 4096
	runForgeDir              = "/run/forge"
)

// Bounds of the task's scratch tmpfs mounts (TMPDIR and HOME).
const (
	MinScratchTmpfsBytes = 16 << 20
	MaxScratchTmpfsBytes = 4 << 30
)

// ScratchTmpfsBytes is the size of each of the task's two scratch tmpfs
// mounts, /tmp (TMPDIR) and /home/forge (HOME), for a worker memory limit:
// half the limit, rounded down to MiB, within [MinScratchTmpfsBytes,
// MaxScratchTmpfsBytes]. A tmpfs holds its files in memory that the kernel
// charges to the worker's memory limit (and swap is off), so both full
// together reach the limit: a task that fills one gets ENOSPC from its
// size first, one that fills both and allocates too is OOM-killed.
func ScratchTmpfsBytes(workerMemoryBytes int64) int64 {
	size := (workerMemoryBytes / 2) &^ (1<<20 - 1)
	return min(max(size, MinScratchTmpfsBytes), MaxScratchTmpfsBytes)
}

// scratchTmpfsOptions are the mount options of a scratch tmpfs: executable
// (the engine adds noexec to a tmpfs unless exec is given, and toolchains
// run the binaries they build under TMPDIR and HOME), sized, owned by the
// attempt's sandbox user.
func scratchTmpfsOptions(sizeBytes int64, mode string, user messages.SandboxUser) string {
	return fmt.Sprintf("rw,nosuid,nodev,exec,size=%dm,uid=%d,gid=%d,mode=%s",
		sizeBytes>>20, user.UID, user.GID, mode)
}

// runForgeTmpfsOptions are the mount options of /run/forge, forged's
// control files (the lease updates), owned by the sandbox user.
func runForgeTmpfsOptions(user messages.SandboxUser) string {
	return fmt.Sprintf("rw,nosuid,nodev,noexec,size=32m,uid=%d,gid=%d", user.UID, user.GID)
}

// WorkerSpec describes the worker container of one attempt.
type WorkerSpec struct {
	Name, Image, WorkingDir string
	// User is the attempt's sandbox user (its slot's uid): the worker and
	// the task run as it, and the tmpfs mounts are its. The zero user is
	// messages.ImageUser.
	User messages.SandboxUser
	// Network is the isolated network (CreateIsolatedNetwork) the worker
	// joins; empty means NetworkMode "none": loopback only.
	Network string
	// OpenNetwork says Network is a routed network (open_public, see
	// CreateRoutedNetwork): the worker then resolves names through the
	// engine's resolver instead of its own loopback.
	OpenNetwork bool
	// NetnsContainer, with OpenNetwork, is the guarded netns holder
	// (StartNetnsHolder) whose network namespace the worker joins instead
	// of joining Network itself.
	NetnsContainer string
	Labels         map[string]string
	Resources      messages.RequestedResources
	Env            []string
	// SecurityOpts are extra operator options in Engine API form
	// ("seccomp=<profile JSON>", "apparmor=<profile>"); see
	// ResolveSecurityOptions. no-new-privileges is always set.
	SecurityOpts                                  []string
	WorkspaceVolume, ControlVolume, SecretsVolume string
	// Credentials, when set, mounts the provider credentials volume at
	// the dispatch's chosen path (messages.CredentialMount).
	Credentials *CredentialsMount
	// Caches are the contract's package caches (package caches).
	Caches []CacheMount
	// Entrypoint is the worker command, e.g. ["/opt/forge/forged", "worker"].
	Entrypoint []string
	// Runtime is the engine's OCI runtime the worker runs under ("": the
	// engine's default, runc; "runsc" under the gvisor isolation floor).
	Runtime string
	// GVisor says Runtime is gVisor's runsc: the container's pids limit
	// then counts the sandbox kernel's own host threads and, on the ptrace
	// platform, a stub per task process, so it is GVisorPIDsLimit of
	// Resources.PIDs.
	GVisor bool
	// Hosts, on Network, are names the worker resolves through its
	// /etc/hosts (ExtraHosts) instead of the engine's embedded resolver,
	// which gVisor's network stack cannot reach: CreateWorker looks up
	// each container's address on Network.
	Hosts []HostAlias
}

// CredentialsMount is the worker's provider credentials volume at the
// dispatch's chosen Target, read-only unless Writable.
type CredentialsMount struct {
	Volume, Target string
	Writable       bool
}

// HostAlias is one /etc/hosts name of the worker: Alias resolves to
// Container's address on the worker's network.
type HostAlias struct {
	Alias, Container string
}

// Under runsc a container's pids cgroup holds the sandbox kernel (the
// Sentry: its Go threads, the gofer) and, on the ptrace platform, host
// threads for every task process. Measured with Debian's 20221219 release
// (ptrace), as pids.current: 44 with the task's shell and one sleep, 134
// with ten more sleeps, 357 with forty more, about 9 per task process;
// runsc does not start under 32. A dispatch's pids is the task's process
// budget, as under runc, so the gVisor worker's limit is
// gVisorPIDsBase + gVisorPIDsPerTask × pids: the task still gets about
// pids processes, and runsc always starts.
const (
	gVisorPIDsBase    = 64
	gVisorPIDsPerTask = 10
)

// GVisorPIDsLimit is the pids limit of a gVisor container whose task may
// run pids processes.
func GVisorPIDsLimit(pids int64) int64 { return gVisorPIDsBase + gVisorPIDsPerTask*pids }

// CacheMount is one package cache volume in the worker. A per-attempt
// cache is mounted read-write, the sandbox user's (see
// WorkerContainerConfig); a read-only one is mounted read-only without copy-up, so nothing
// is ever written into it from the worker.
type CacheMount struct {
	Volume, Target string
	ReadOnly       bool
}

// WorkerContainerConfig returns the hardened create configuration of the
// worker: attached interactive stdio without a TTY (the start packet goes
// to stdin once), read-only root filesystem, every capability dropped,
// no-new-privileges, PID/memory/CPU/ulimit bounds with swap disabled,
// private sized tmpfs mounts (executable /tmp and /home/forge for the task,
// noexec /run/forge for forged's control files), an unprivileged numeric
// user, docker-init as PID 1, no log driver, and the workspace, control and
// (read-only) secrets volumes. Its network is none (loopback only), or the
// isolated network spec.Network with IPv6 switched off inside the
// container; either way its only DNS server is its own loopback
// (SandboxNameserver). See network.go for the isolation design.
//
// The agent image carries /workspace, /control/input and /control/output
// owned by the image user (messages.ImageUser), and the engine's copy-up
// on first mount gives an empty plain volume that owner. An attempt with a
// sandbox user of its own (the supervisor's uid range) mounts the
// workspace, control and per-attempt cache volumes with volume-nocopy
// instead: their roots, and /control/input and /control/output, are made
// its own before the worker is created (OwnVolumes), and a copy-up would
// give them back to the image user.
func WorkerContainerConfig(spec WorkerSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	r := spec.Resources
	user := spec.User.OrImage()
	var owned *mount.VolumeOptions // the image user's volumes take the copy-up
	if user != messages.ImageUser {
		owned = noCopy()
	}
	pids := r.PIDs
	if spec.GVisor {
		pids = GVisorPIDsLimit(pids)
	}
	scratch := ScratchTmpfsBytes(r.WorkerMemoryLimitBytes)
	initProcess := true
	stopTimeout := workerStopTimeoutSeconds
	cfg := &container.Config{
		Image:        spec.Image,
		User:         user.String(),
		WorkingDir:   spec.WorkingDir,
		Env:          slices.Clone(spec.Env),
		Labels:       maps.Clone(spec.Labels),
		Entrypoint:   slices.Clone(spec.Entrypoint),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
		StopTimeout:  &stopTimeout,
	}
	// The image's HEALTHCHECK and STOPSIGNAL are not the worker's (its ENV
	// is reset at create, notFromImage).
	resetImageRuntime(cfg)
	host := &container.HostConfig{
		Runtime:        spec.Runtime,
		NetworkMode:    network.NetworkNone,
		DNS:            []string{SandboxNameserver},
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    append([]string{"no-new-privileges"}, spec.SecurityOpts...),
		Init:           &initProcess,
		LogConfig:      container.LogConfig{Type: "none"},
		Tmpfs: map[string]string{
			messages.TempDir: scratchTmpfsOptions(scratch, "1777", user),
			messages.HomeDir: scratchTmpfsOptions(scratch, "0700", user),
			runForgeDir:      runForgeTmpfsOptions(user),
		},
		Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: spec.WorkspaceVolume, Target: messages.WorkspaceDir, VolumeOptions: owned},
			{Type: mount.TypeVolume, Source: spec.ControlVolume, Target: messages.ControlDir, VolumeOptions: owned},
			{Type: mount.TypeVolume, Source: spec.SecretsVolume, Target: SecretsDir, ReadOnly: true},
		},
		Resources: container.Resources{
			Memory:     r.WorkerMemoryLimitBytes,
			MemorySwap: r.WorkerMemoryLimitBytes,
			NanoCPUs:   r.CPUMillis * 1_000_000,
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: workerNoFile, Hard: workerNoFile},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	if c := spec.Credentials; c != nil {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: c.Volume, Target: c.Target, ReadOnly: !c.Writable, VolumeOptions: noCopy()})
	}
	for _, c := range spec.Caches {
		m := mount.Mount{Type: mount.TypeVolume, Source: c.Volume, Target: c.Target, ReadOnly: c.ReadOnly, VolumeOptions: owned}
		if c.ReadOnly {
			m.VolumeOptions = noCopy()
		}
		host.Mounts = append(host.Mounts, m)
	}
	net := &network.NetworkingConfig{}
	if spec.Network != "" {
		host.NetworkMode = container.NetworkMode(spec.Network)
		host.Sysctls = maps.Clone(isolatedSysctls)
		net.EndpointsConfig = map[string]*network.EndpointSettings{spec.Network: {}}
		if spec.OpenNetwork {
			host.DNS = nil
			if spec.NetnsContainer != "" {
				// The holder's namespace: its network, resolver and IPv6
				// switch.
				host.NetworkMode = container.NetworkMode("container:" + spec.NetnsContainer)
				host.Sysctls = nil
				net.EndpointsConfig = nil
			}
		}
	}
	return cfg, host, net
}

func (s WorkerSpec) validate() error {
	switch {
	case s.Name == "", s.Image == "":
		return fmt.Errorf("worker spec needs a name and an image")
	case s.WorkspaceVolume == "", s.ControlVolume == "", s.SecretsVolume == "":
		return fmt.Errorf("worker spec needs workspace, control and secrets volumes")
	case s.NetnsContainer != "" && (!s.OpenNetwork || s.Network == ""):
		return fmt.Errorf("worker netns container needs an open network")
	case s.OpenNetwork && s.NetnsContainer == "":
		return fmt.Errorf("an open_public worker joins only its guarded netns holder, and none is given")
	case len(s.Hosts) > 0 && (s.Network == "" || s.OpenNetwork):
		return fmt.Errorf("worker hosts need an isolated network")
	case s.Credentials != nil && (s.Credentials.Volume == "" || messages.ValidateCredentialMountPath(s.Credentials.Target) != nil):
		return fmt.Errorf("worker credentials mount needs a volume and a target under %s/ or %s", messages.HomeDir, messages.CredentialsDir)
	case s.Credentials != nil && overlapsCache(s.Credentials.Target, s.Caches):
		return fmt.Errorf("the credentials mount %s overlaps a package cache's mount: choose another execution.credentialMount.path", s.Credentials.Target)
	case !validCaches(s.Caches):
		return fmt.Errorf("worker cache mounts need a volume and an absolute target under %s", messages.HomeDir)
	case s.WorkingDir == "" || !path.IsAbs(s.WorkingDir):
		return fmt.Errorf("worker working directory %q is not absolute", s.WorkingDir)
	case s.Resources.WorkerMemoryLimitBytes <= 0, s.Resources.CPUMillis <= 0, s.Resources.PIDs <= 0:
		return fmt.Errorf("worker memory, CPU and PID limits must be positive")
	}
	return nil
}

// overlapsCache reports whether target is, holds or lies inside a cache's
// mount.
func overlapsCache(target string, cs []CacheMount) bool {
	for _, c := range cs {
		if target == c.Target || strings.HasPrefix(c.Target, target+"/") || strings.HasPrefix(target, c.Target+"/") {
			return true
		}
	}
	return false
}

func validCaches(cs []CacheMount) bool {
	for _, c := range cs {
		if c.Volume == "" || path.Clean(c.Target) != c.Target || !strings.HasPrefix(c.Target, messages.HomeDir+"/") {
			return false
		}
	}
	return true
}

// CreateWorker creates (does not start) the worker container and returns
// its id. Failures carry failure.SandboxCreateFailed.
func (c *Client) CreateWorker(ctx context.Context, spec WorkerSpec) (string, error) {
	if err := spec.validate(); err != nil {
		return "", failure.Wrap(failure.SandboxCreateFailed, err, "container create")
	}
	volumes, imageEnv, err := c.imageFacts(ctx, spec.Image)
	if err != nil {
		return "", err
	}
	extraHosts, err := c.hostEntries(ctx, spec.Network, spec.Hosts)
	if err != nil {
		return "", err
	}
	attempt := 0
	id, err := call(ctx, c, c.opts.Timeouts.Create, writeCall, func(ctx context.Context) (string, error) {
		attempt++
		cfg, host, net := WorkerContainerConfig(spec)
		host.ExtraHosts = slices.Clone(extraHosts)
		coverVolumes(host, volumes, workerVolumeTmpfsOptions(spec.Resources.WorkerMemoryLimitBytes, spec.User.OrImage()))
		notFromImage(cfg, imageEnv, inheritable)
		if c.withoutNetworkSandbox(spec) {
			cfg.NetworkDisabled = true
			host.Mounts = append(host.Mounts, c.sandboxEtcMounts()...)
		}
		resp, err := c.creator.ContainerCreate(ctx, cfg, host, net, nil, spec.Name)
		if err == nil {
			return resp.ID, nil
		}
		if attempt > 1 && cerrdefs.IsConflict(err) {
			// A previous attempt may have created it unheard: adopt the
			// container only if it carries all our labels (the engine
			// merges the image's labels in).
			if existing, ierr := c.creator.ContainerInspect(ctx, spec.Name); ierr == nil &&
				existing.Config != nil && hasLabels(existing.Config.Labels, spec.Labels) {
				return existing.ID, nil
			}
		}
		return "", err
	})
	if err != nil {
		return "", opError(ctx, failure.SandboxCreateFailed, err, "container create %s", spec.Name)
	}
	return id, nil
}

// hostEntries are the worker's ExtraHosts for hosts: each container's
// address on network, "alias:address". A container without one fails the
// create (failure.SandboxCreateFailed).
func (c *Client) hostEntries(ctx context.Context, network string, hosts []HostAlias) ([]string, error) {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		inspected, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (container.InspectResponse, error) {
			return c.creator.ContainerInspect(ctx, h.Container)
		})
		if err != nil {
			return nil, opError(ctx, failure.SandboxCreateFailed, err, "inspect %s for the worker's hosts", h.Container)
		}
		var addr string
		if inspected.NetworkSettings != nil {
			if ep := inspected.NetworkSettings.Networks[network]; ep != nil {
				addr = ep.IPAddress
			}
		}
		if addr == "" {
			return nil, failure.New(failure.SandboxCreateFailed, "container %s has no address on network %s for the worker's host %s", h.Container, network, h.Alias)
		}
		out = append(out, h.Alias+":"+addr)
	}
	return out, nil
}

// WorkerEnv returns the worker's environment for the dispatch (the seed's
// list without proxy variables, and without FORGE_FENCING_TOKEN: the
// environment is the task's too, readable in /proc/1/environ, and the
// fencing token is a credential of the lease renewal and the publication
// grant; the worker has it from its start packet).
func WorkerEnv(d *messages.Dispatch, inputCommitSHA string) []string {
	attempt := d.Sandbox.DispatchAttemptID
	lease := d.Sandbox.ExecutionLeaseID
	return []string{
		"FORGE_SESSION_ID=" + d.Session.ID,
		"FORGE_DISPATCH_ATTEMPT_ID=" + attempt,
		"FORGE_RESOURCE_LEASE_ID=" + lease,
		"FORGE_EXECUTION_LEASE_ID=" + lease,
		"FORGE_RUNTIME_MODE=docker",
		"FORGE_SANDBOX_ID=" + attempt,
		"FORGE_WORKSPACE=" + messages.WorkspaceDir,
		"FORGE_WORKTREE_PATH=" + messages.WorkspaceDir,
		"FORGE_TMPDIR=" + messages.TempDir,
		"FORGE_LOG_DIR=" + messages.OutputDir + "/logs",
		"FORGE_BROWSER_PROFILE_DIR=/tmp/forge-browser-profile",
		"FORGE_INPUT_COMMIT_SHA=" + inputCommitSHA,
		"FORGE_INPUT_BUNDLE=" + messages.InputBundlePath,
		"HOME=" + messages.HomeDir,
		"TMPDIR=" + messages.TempDir,
	}
}

// inheritable says which of the image's variables the worker (and its
// task) keeps (notFromImage): all but
//   - forged's own namespace, FORGE_*: only forged names those;
//   - the Go runtime's knobs (GODEBUG, GOGC, GOMEMLIMIT, GOMAXPROCS,
//     GOTRACEBACK), which would steer the worker binary itself;
//   - the dynamic loader's injection variables (LD_PRELOAD, LD_AUDIT);
//   - proxy variables (http_proxy, https_proxy, ftp_proxy, all_proxy,
//     no_proxy, either case): forged alone decides the network path.
//
// Every other variable survives into the worker and the task: PATH and
// the toolchains' own (GOPATH, CARGO_HOME, JAVA_HOME, LANG, …).
// notInherited are the image variables inheritable refuses by name.
var notInherited = map[string]bool{
	"GODEBUG": true, "GOGC": true, "GOMEMLIMIT": true, "GOMAXPROCS": true, "GOTRACEBACK": true,
	"LD_PRELOAD": true, "LD_AUDIT": true,
	"http_proxy": true, "https_proxy": true, "ftp_proxy": true, "all_proxy": true, "no_proxy": true,
}

func inheritable(name string) bool {
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(name, "FORGE_"), notInherited[name]:
		return false
	case strings.HasSuffix(lower, "_proxy") && notInherited[lower]: // HTTPS_PROXY and the like
		return false
	}
	return true
}

// hasLabels reports whether actual carries every label of want.
func hasLabels(actual, want map[string]string) bool {
	for k, v := range want {
		if got, ok := actual[k]; !ok || got != v {
			return false
		}
	}
	return true
}
