package preflight

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Options configures a Checker. Zero fields take the defaults.
type Options struct {
	// AllowRootful accepts an engine that does not run rootless. Rootless
	// is required otherwise.
	AllowRootful bool
	// Endpoint is the engine's address (client.DaemonHost()). Only a local
	// endpoint (unix://, npipe://, or empty) has its Docker root directory
	// measured; a remote engine's disk is approximated by StateRoot.
	Endpoint string
	// StateRoot is forged's state directory, measured when the Docker root
	// directory cannot be. Default os.TempDir().
	StateRoot string
	// CallTimeout bounds each engine call. Default 10s.
	CallTimeout time.Duration
	Disk        DiskPolicy
	Capacity    CapacityPolicy
	// Clock stamps the reports (CheckedAt); nil means clock.System.
	Clock clock.Clock
	// Isolation probes whether attempt networks can be isolated from the
	// host (nil: they cannot be verified, and attempts that need a network
	// are refused). IsolationTTL is how long a probe stays valid for the
	// same engine; default DefaultIsolationTTL.
	Isolation    IsolationProber
	IsolationTTL time.Duration
	// DetectStorage finds how attempt volumes are bounded, given whether
	// the engine runs rootless. Default quota.Detect.
	DetectStorage func(engineRootless bool) quota.Facts
	// ProbeKernelFacts finds which kernel facts about a sandbox this
	// process can read. Default ProbeKernelFacts.
	ProbeKernelFacts func() messages.KernelFactsAccess
	// Services, when set, reports the service catalogue's state in the
	// engine (runner wires the catalogue's check here).
	Services func(ctx context.Context) []ServiceImage
	// Toolchains, when set, lists the toolchain images in the engine
	// (runner wires ToolchainCheck here).
	Toolchains func(ctx context.Context) []ToolchainImage
	// IsolationFloor is the operator's isolation floor: messages.IsolationRunc
	// (default) or messages.IsolationGVisor, under which a host without a
	// working GVisorRuntime is unavailable (SandboxIsolationUnavailable).
	IsolationFloor string
	// GVisorRuntime is the engine's name for runsc; default
	// DefaultGVisorRuntime. GVisorProbeImage is the probe container's
	// image; default DefaultGVisorProbeImage. Runtimes runs the probe
	// (nil: gVisor is never found working). The probe is cached like the
	// network's, for IsolationTTL.
	GVisorRuntime    string
	GVisorProbeImage string
	Runtimes         RuntimeProber
	// ProbeGVisor probes the gVisor runtimes under the runc floor too
	// (cached like the floor's): the runner offers gVisor to some
	// dispatches (--allow-gvisor-dispatch, --sandbox-required-isolation
	// gvisor). A failing probe then leaves the host available.
	ProbeGVisor bool
	// ImagePolicy is reported as the feature imagePolicy: the operator's
	// image policy is enforced and complete, and builds have no network.
	ImagePolicy bool
	// GVisorNetworkRuntime is the engine's name for runsc with its own
	// network stack (default DefaultGVisorNetworkRuntime), probed like
	// GVisorRuntime under the gvisor floor. When it does not work, the
	// host stays available for attempts without a network.
	GVisorNetworkRuntime string
	// SeccompProfile and LSMOption are the operator's worker security
	// settings (--seccomp-profile, --lsm); the report's securityProfile
	// feature says whether the engine enforces both.
	SeccompProfile string
	LSMOption      string
	// AllowDockerDesktop accepts a Docker Desktop engine (desktop.go)
	// although it is not rootless. ContainerMemory sums the running
	// containers' memory on such an engine; default: over the Engine API
	// when the engine is a *client.Client.
	AllowDockerDesktop bool
	ContainerMemory    ContainerMemory
}

// supportedPlatforms are the OSes forged can drive Docker sandboxes from.
var supportedPlatforms = map[string]bool{"linux": true, "darwin": true, "windows": true}

// Checker produces Reports. It keeps the disk-pressure latch between
// checks, so keep one Checker per engine. It is safe for concurrent use;
// checks run one at a time.
type Checker struct {
	engine Engine
	host   HostFacts
	opts   Options
	now    func() time.Time

	mu   sync.Mutex
	disk DiskState // the hysteresis latch
	// The last isolation probe, for the engine identified by isolationFor.
	isolation    NetworkIsolation
	isolationFor string
	isolationAt  time.Time
	// The last gVisor probes: runsc's, and its network registration's.
	gvisor, gvisorNet runtimeProbeCache
}

// NewChecker returns a Checker for engine (nil: every check reports
// docker_unreachable) and host (nil: LocalHost()).
func NewChecker(engine Engine, host HostFacts, opts Options) *Checker {
	if host == nil {
		host = LocalHost()
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.StateRoot == "" {
		opts.StateRoot = os.TempDir()
	}
	opts.Capacity = opts.Capacity.withDefaults()
	if opts.IsolationTTL <= 0 {
		opts.IsolationTTL = DefaultIsolationTTL
	}
	if opts.DetectStorage == nil {
		opts.DetectStorage = quota.Detect
	}
	if opts.ProbeKernelFacts == nil {
		opts.ProbeKernelFacts = ProbeKernelFacts
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.IsolationFloor == "" {
		opts.IsolationFloor = messages.IsolationRunc
	}
	if opts.GVisorRuntime == "" {
		opts.GVisorRuntime = DefaultGVisorRuntime
	}
	if opts.GVisorProbeImage == "" {
		opts.GVisorProbeImage = DefaultGVisorProbeImage
	}
	if opts.GVisorNetworkRuntime == "" {
		opts.GVisorNetworkRuntime = DefaultGVisorNetworkRuntime
	}
	if opts.ContainerMemory == nil {
		opts.ContainerMemory = engineContainerMemory(engine)
	}
	return &Checker{engine: engine, host: host, opts: opts, now: opts.Clock.Now}
}

// Check asks the engine and the host and returns the verdict. Failures are
// reported in the Report, never returned.
func (c *Checker) Check(ctx context.Context) Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{
		CheckedAt:        c.now().UTC(),
		MaxSlots:         c.opts.Capacity.MaxSlots,
		RootlessRequired: !c.opts.AllowRootful,
		Engine:           EngineFacts{Endpoint: c.opts.Endpoint},
		Features:         Features{LSM: []string{}, ImagePolicy: c.opts.ImagePolicy},
		Network:          NetworkFacts{DefaultMode: "none", Code: failure.SandboxNetworkIsolation},
		Isolation: IsolationFacts{Floor: c.opts.IsolationFloor, Runtimes: []string{}, GVisor: GVisorFacts{Runtime: c.opts.GVisorRuntime},
			GVisorNetwork: GVisorFacts{Runtime: c.opts.GVisorNetworkRuntime}},
	}
	goos, goarch := c.host.Platform()
	r.Platform = Platform{OS: goos, Arch: goarch, Supported: supportedPlatforms[goos]}
	if !r.Platform.Supported {
		return refuse(r, PlatformUnsupported, "forged on %s/%s cannot drive Docker sandboxes; supported: linux, darwin, windows", goos, goarch)
	}
	if c.engine == nil {
		return refuse(r, DockerUnreachable, "no Docker engine client")
	}
	ping, err := callEngine(ctx, c.opts.CallTimeout, c.engine.Ping)
	if err != nil {
		return refuse(r, DockerUnreachable, "docker ping%s: %v", c.at(), err)
	}
	info, err := callEngine(ctx, c.opts.CallTimeout, c.engine.Info)
	if err != nil {
		return refuse(r, DockerUnreachable, "docker info%s: %v", c.at(), err)
	}
	version, err := callEngine(ctx, c.opts.CallTimeout, c.engine.ServerVersion)
	if err != nil {
		return refuse(r, DockerUnreachable, "docker version%s: %v", c.at(), err)
	}
	r.Engine = EngineFacts{
		Endpoint:        c.opts.Endpoint,
		Reachable:       true,
		OSType:          info.OSType,
		Linux:           strings.EqualFold(info.OSType, "linux"),
		APIVersion:      firstNonEmpty(version.APIVersion, ping.APIVersion),
		MinAPIVersion:   version.MinAPIVersion,
		ServerVersion:   firstNonEmpty(version.Version, info.ServerVersion),
		OperatingSystem: info.OperatingSystem,
		KernelVersion:   info.KernelVersion,
		Architecture:    info.Architecture,
		DockerRootDir:   info.DockerRootDir,
		NCPU:            info.NCPU,
		MemTotalBytes:   info.MemTotal,
		DockerDesktop:   isDockerDesktop(goos, info.OperatingSystem),
	}
	r.Features = featuresOf(info, ping)
	r.Features.ImagePolicy = c.opts.ImagePolicy
	r.Features.SecurityProfile = securityProfile(r.Features, c.opts.SeccompProfile, c.opts.LSMOption)
	if c.opts.Services != nil {
		r.Services = c.opts.Services(ctx)
	}
	if c.opts.Toolchains != nil {
		r.Toolchains = c.opts.Toolchains(ctx)
	}
	if r.Engine.Linux {
		r.Network = c.networkFacts(ctx, info.ID+"/"+r.Engine.ServerVersion, r.Engine.ServerVersion)
		r.Isolation = c.isolationFacts(ctx, info, info.ID+"/"+r.Engine.ServerVersion)
	}
	isolationCode, isolationReason := isolationRefusal(r.Isolation)

	switch {
	case !r.Engine.Linux:
		r.Code = DockerLinuxRequired
		r.Reason = fmt.Sprintf("the engine%s runs %q containers; sandbox images need a Linux engine", c.at(), info.OSType)
	case !r.Features.Rootless && !c.opts.AllowRootful && !(r.Engine.DockerDesktop && c.opts.AllowDockerDesktop):
		r.Code = DockerRootlessRequired
		r.Reason = fmt.Sprintf("the engine%s runs rootful (security options %v); run dockerd rootless, or allow a rootful engine explicitly (--allow-rootful)", c.at(), info.SecurityOptions)
		if r.Engine.DockerDesktop {
			r.Reason += "; on Docker Desktop, allow it with --allow-docker-desktop (or " + DesktopEnv + "=true)"
		}
	case isolationCode != "":
		r.Code, r.Reason = isolationCode, isolationReason
	}
	c.measure(ctx, &r, goos)
	r.Reason = singleLine(r.Reason)
	r.Available = r.Code == "" && r.Capacity > 0
	return r
}

// measure fills disk, memory, CPU and, unless the engine already refused,
// the capacity with its code and reason.
func (c *Checker) measure(ctx context.Context, r *Report, goos string) {
	path := c.opts.StateRoot
	if goos == "linux" && c.localEngine() && filepath.IsAbs(r.Engine.DockerRootDir) {
		path = r.Engine.DockerRootDir
	}
	total, free, diskErr := c.host.DiskUsage(path)
	if diskErr != nil && path != c.opts.StateRoot {
		path = c.opts.StateRoot
		total, free, diskErr = c.host.DiskUsage(path)
	}
	prev := c.disk
	if prev.Path != path {
		prev = DiskState{Path: path} // a different filesystem starts unlatched
	}
	c.disk = EvaluateDiskPressure(prev, total, free, c.opts.Disk)
	memory, memErr := c.host.AvailableMemory()
	if memErr != nil {
		memory = 0
	}
	if r.Engine.DockerDesktop {
		if vm, ok := c.desktopMemory(ctx, r.Engine.MemTotalBytes); ok {
			memory = vm
		}
	}
	adm := Capacity(c.disk, memory, c.host.CPUCores(), c.opts.Capacity)
	r.Disk, r.Memory, r.CPU, r.MaxSlots = c.disk, adm.Memory, adm.CPU, adm.MaxSlots
	if r.Code != "" {
		return
	}
	r.Capacity, r.Code, r.Reason = adm.Capacity, adm.Code, adm.Reason
	if c.localEngine() && goos == "linux" {
		r.Storage = c.opts.DetectStorage(r.Features.Rootless)
		r.KernelFacts = c.opts.ProbeKernelFacts()
	} else {
		r.Storage = quota.Facts{Mechanism: quota.MechanismNone, Reason: "the engine does not share this host's devices"}
		r.KernelFacts = messages.KernelFactsAccess{Reason: "the engine does not share this host's processes"}
	}
	stateTotal, stateFree, stateErr := total, free, diskErr
	if path != c.opts.StateRoot {
		stateTotal, stateFree, stateErr = c.host.DiskUsage(c.opts.StateRoot)
	}
	if stateErr == nil && stateTotal > 0 {
		r.DiskSlots = diskSlots(c.opts.StateRoot, stateFree, r.Storage, c.opts.Disk, c.opts.Capacity)
		admitDisk(r)
	} else {
		r.DiskSlots = DiskSlots{Path: c.opts.StateRoot, Slots: -1}
	}
	switch {
	case r.Code == DockerDiskLow && diskErr != nil:
		r.Reason = fmt.Sprintf("cannot measure the disk of %s: %v", path, diskErr)
	case r.Code == DockerMemoryLow && memErr != nil:
		r.Reason = fmt.Sprintf("cannot measure available memory: %v", memErr)
	}
}

// localEngine reports whether the engine shares this host's filesystems.
func (c *Checker) localEngine() bool {
	e := c.opts.Endpoint
	return e == "" || strings.HasPrefix(e, "unix://") || strings.HasPrefix(e, "npipe://")
}

// at renders " at ENDPOINT" when the endpoint is known.
func (c *Checker) at() string {
	if c.opts.Endpoint == "" {
		return ""
	}
	return " at " + c.opts.Endpoint
}

// refuse ends a check early with code.
func refuse(r Report, code failure.Code, format string, args ...any) Report {
	r.Code, r.Reason, r.Capacity, r.Available = code, singleLine(fmt.Sprintf(format, args...)), 0, false
	return r
}

// callEngine runs one engine call under its own deadline.
func callEngine[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// singleLine folds whitespace runs (engine errors span lines) and bounds
// the length.
func singleLine(s string) string { return text.OneLine(s, maxReasonBytes) }

// maxReasonBytes bounds a check's reason.
const maxReasonBytes = 1000
