package messages

import (
	"time"

	"github.com/forgedev/forged/failure"
)

// Storage mechanisms that bound an attempt's volumes (StorageFacts.Mechanism).
const (
	StorageMechanismImage = "filesystem_image"
	StorageMechanismNone  = "none"
)

// HostReport is one preflight verdict. Available is true exactly when Code is
// empty and Capacity is positive.
type HostReport struct {
	// Generation numbers the Cache's refreshes (0 from a bare Checker).
	Generation uint64    `json:"generation"`
	CheckedAt  time.Time `json:"checkedAt"`

	Available bool         `json:"available"`
	Code      failure.Code `json:"code,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	// Capacity is how many attempts may run at once; 0 when unavailable.
	Capacity int `json:"capacity"`
	// MaxSlots is the configured maximum the capacity never exceeds.
	MaxSlots int `json:"maxSlots"`
	// RootlessRequired is false when a rootful engine was allowed.
	RootlessRequired bool `json:"rootlessRequired"`

	Platform HostPlatform   `json:"platform"`
	Engine   EngineFacts    `json:"engine"`
	Features EngineFeatures `json:"features"`
	Network  NetworkFacts   `json:"network"`
	Disk     DiskState      `json:"disk"`
	// Storage says how attempt volumes are bounded (quota.Detect).
	Storage StorageFacts `json:"storage"`
	// KernelFacts says which of the kernel's own facts about a running
	// sandbox forged can read; without them classification is best-effort.
	KernelFacts KernelFactsAccess `json:"kernelFacts"`
	// Isolation is the operator's isolation floor and what the engine
	// offers for it (the runtimes it registers, runsc's probe).
	Isolation IsolationFacts `json:"isolation"`
	// DiskSlots is the disk side of admission.
	DiskSlots DiskSlots   `json:"diskSlots"`
	Memory    MemorySlots `json:"memory"`
	CPU       CPUSlots    `json:"cpu"`
	// Services is the service catalogue's state in the engine: every
	// configured service, its pinned image and whether the engine holds
	// exactly that image (ready, missing, mismatch, unknown). A service
	// that is not ready refuses the attempts declaring it, not the host.
	Services []ServiceImage `json:"services,omitempty"`
	// Toolchains are the toolchain images the engine holds (labelled
	// org.forged.image.name by scripts/images.sh), which a project's
	// .forge/Dockerfile builds FROM.
	Toolchains []ToolchainImage `json:"toolchains,omitempty"`
}

// ToolchainImage is one toolchain image in the engine: its toolchain name
// (the label), a reference it is tagged with, and its id.
type ToolchainImage struct {
	Name    string `json:"name"`
	Ref     string `json:"ref,omitempty"`
	ImageID string `json:"imageId"`
}

// ServiceImage is one service catalogue entry's state.
type ServiceImage struct {
	Service string `json:"service"`
	Ref     string `json:"ref"`
	ImageID string `json:"imageId"`
	State   string `json:"state"`
	Detail  string `json:"detail,omitempty"`
}

// HostPlatform is the OS forged itself runs on.
type HostPlatform struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Supported bool   `json:"supported"`
}

// EngineFacts identify the Docker engine that answered.
type EngineFacts struct {
	Endpoint        string `json:"endpoint,omitempty"`
	Reachable       bool   `json:"reachable"`
	OSType          string `json:"osType,omitempty"`
	Linux           bool   `json:"linux"`
	APIVersion      string `json:"apiVersion,omitempty"`
	MinAPIVersion   string `json:"minApiVersion,omitempty"`
	ServerVersion   string `json:"serverVersion,omitempty"`
	OperatingSystem string `json:"operatingSystem,omitempty"`
	KernelVersion   string `json:"kernelVersion,omitempty"`
	Architecture    string `json:"architecture,omitempty"`
	DockerRootDir   string `json:"dockerRootDir,omitempty"`
	NCPU            int    `json:"ncpu,omitempty"`
	MemTotalBytes   int64  `json:"memTotalBytes,omitempty"`
	// DockerDesktop: the engine is Docker Desktop's VM seen from a
	// non-Linux host; its memory is measured in the VM.
	DockerDesktop bool `json:"dockerDesktop,omitempty"`
}

// EngineFeatures are the engine's isolation and build facilities.
type EngineFeatures struct {
	Rootless       bool     `json:"rootless"`
	UserNamespaces bool     `json:"userNamespaces"`
	CgroupVersion  string   `json:"cgroupVersion"`
	CgroupDriver   string   `json:"cgroupDriver"`
	Seccomp        bool     `json:"seccomp"`
	SeccompProfile string   `json:"seccompProfile,omitempty"`
	LSM            []string `json:"lsm"` // "apparmor", "selinux"
	StorageDriver  string   `json:"storageDriver"`
	// StorageQuota: overlay2 whose driver status advertises project quota
	// support. The engine rarely says so; false means "not advertised".
	StorageQuota bool `json:"storageQuota"`
	// ClassicBuilder: the engine serves the classic /build API (every
	// Linux engine does).
	ClassicBuilder bool `json:"classicBuilder"`
	// BuildKit: the engine's Ping advertises BuildKit as its builder.
	BuildKit bool `json:"buildKit"`
	// BuilderVersion is Ping's Builder-Version ("1" classic, "2" BuildKit).
	BuilderVersion string `json:"builderVersion,omitempty"`
	// ImagePolicy is the seed's feature: an enforced image policy with
	// every part (SBOM command, scan command, provenance key) and builds
	// with no network. An operator setting, not an engine fact.
	ImagePolicy bool `json:"imagePolicy"`
	// SecurityProfile is the seed's feature of that name: the operator
	// configured both a seccomp profile and an LSM option for workers,
	// and the engine enforces seccomp and the module the option names
	// (AppArmor for apparmor=, SELinux for label=). Without it the
	// sandbox_required policy refuses every attempt.
	SecurityProfile bool `json:"securityProfile"`
}

// NetworkIsolation is what a probe learnt about isolated networks on this
// engine and host.
type NetworkIsolation struct {
	// Mechanism names the isolation mechanism.
	Mechanism string `json:"mechanism"`
	// Verified: a probe network was created and checked from the host's
	// side. Attempts that need a network are refused otherwise.
	Verified bool `json:"verified"`
	// Reason says why it is not verified.
	Reason string `json:"reason,omitempty"`
	// Nameserver is every sandbox's only DNS server.
	Nameserver string `json:"nameserver,omitempty"`
}

// NetworkFacts say how sandboxes are kept off the host's network.
type NetworkFacts struct {
	// DefaultMode is the network of an attempt without services or egress:
	// "none", a loopback interface and nothing else.
	DefaultMode string `json:"defaultMode"`
	// Isolation is the mechanism for attempts that need a network, and
	// whether a probe verified it on this engine and host.
	Isolation NetworkIsolation `json:"isolation"`
	// ProbedAt is when Isolation was last probed.
	ProbedAt time.Time `json:"probedAt,omitzero"`
	// Code is failure.SandboxNetworkIsolation when attempts that need a
	// network are refused; those without one still run.
	Code failure.Code `json:"code,omitempty"`
	// DNS is the engine's internal-network DNS forwarding status
	// (CVE-2024-29018) and what forged does about it.
	DNS DNSFacts `json:"dns"`
}

// DNSFacts describe DNS from the sandbox.
type DNSFacts struct {
	// InternalForwardingFixed: the engine's version no longer forwards
	// DNS queries from internal networks (moby 26.0.0, 25.0.5, 23.0.11).
	InternalForwardingFixed bool `json:"internalForwardingFixed"`
	// Note says what forged does about it.
	Note string `json:"note"`
}

// DiskState is one measurement of the disk, the thresholds it was judged
// by, and the verdict. Low is the hysteresis latch: feed the previous state
// back to EvaluateDiskPressure.
type DiskState struct {
	Path       string  `json:"path,omitempty"`
	TotalBytes int64   `json:"totalBytes"`
	FreeBytes  int64   `json:"freeBytes"`
	UsedRatio  float64 `json:"usedRatio"`
	Low        bool    `json:"low"`

	MinimumFreeBytes int64   `json:"minimumFreeBytes"`
	HighWatermark    float64 `json:"highWatermark"`
	LowWatermark     float64 `json:"lowWatermark"`
}

// DiskSlots is the disk side of admission: how many attempts' bounded
// volumes (workspace plus control image, see quota.PerAttemptBytes) fit in
// the free space of the state root, where the images live, above the
// disk policy's minimum free space. Without a bounding mechanism volumes
// have no size to account for, and Slots is not a limit (-1).
type DiskSlots struct {
	Path            string `json:"path,omitempty"`
	FreeBytes       int64  `json:"freeBytes"`
	ReserveBytes    int64  `json:"reserveBytes"`
	PerAttemptBytes int64  `json:"perAttemptBytes"`
	Slots           int    `json:"slots"`
}

// MemorySlots is the memory side of admission.
type MemorySlots struct {
	AvailableBytes  int64 `json:"availableBytes"`  // MemAvailable of the host
	ReserveBytes    int64 `json:"reserveBytes"`    // kept for the host
	PerAttemptBytes int64 `json:"perAttemptBytes"` // worker + services + runtime overhead
	Slots           int   `json:"slots"`
}

// CPUSlots is the CPU side of admission.
type CPUSlots struct {
	Cores            int   `json:"cores"`
	ReservedCores    int   `json:"reservedCores"`
	AvailableMillis  int64 `json:"availableMillis"`
	MillisPerAttempt int64 `json:"millisPerAttempt"`
	Slots            int   `json:"slots"`
}

// StorageFacts is what preflight reports about volume bounds.
type StorageFacts struct {
	Mechanism string `json:"mechanism"`
	Reason    string `json:"reason,omitempty"`
}

// KernelFactsAccess is what preflight found forged may read of another
// user's process, as it must of a sandbox's: its cgroup (Counters:
// /proc/<pid>/cgroup, which locates the memory, OOM-kill, pids and CPU
// counters) and its file systems (Filesystems: statfs through
// /proc/<pid>/root, which needs ptrace access, so root). Reason says what
// is missing and why.
type KernelFactsAccess struct {
	Counters    bool   `json:"counters"`
	Filesystems bool   `json:"filesystems"`
	Reason      string `json:"reason,omitempty"`
}

// Slots is the number of attempts the host admits now: Capacity when
// available, else 0. Attempts already running are not affected by a
// smaller number; the caller drains down to it.
func (r HostReport) Slots() int {
	if !r.Available {
		return 0
	}
	return r.Capacity
}

// MaintenanceAllowed reports whether Docker maintenance (reaping, GC) may
// run: when available and under the capacity-low codes.
func (r HostReport) MaintenanceAllowed() bool {
	return r.Available || MaintenanceAllowedFor(r.Code)
}

// Err is nil when the host is available, else a *failure.Error with the
// report's code and reason, ready to refuse an admission with.
func (r HostReport) Err() error {
	if r.Available {
		return nil
	}
	return failure.New(r.Code, "%s", r.Reason)
}

// NetworkErr is nil when attempts that need a network may run, else the
// refusal with its code.
func (n NetworkFacts) NetworkErr() error {
	if n.Code == "" {
		return nil
	}
	return failure.New(n.Code, "attempt networks cannot be isolated from this host (%s): %s", n.Isolation.Mechanism, n.Isolation.Reason)
}

// MaintenanceAllowedFor reports whether Docker maintenance (reaping
// leftovers, image and build-cache GC) may run while a Report carries code:
// always when the host is available (code ""), and under the capacity-low
// codes, whose cure is often the maintenance itself. It is refused while the
// engine is unreachable or unsuitable.
func MaintenanceAllowedFor(code failure.Code) bool {
	switch code {
	case "", failure.DockerDiskLow, failure.DockerMemoryLow, failure.DockerCPULow:
		return true
	}
	return false
}

// Bounded reports whether volumes get a size.
func (f StorageFacts) Bounded() bool { return f.Mechanism == StorageMechanismImage }

// Isolation floors (IsolationFacts.Floor, the operator's --isolation).
const (
	IsolationRunc   = "runc"
	IsolationGVisor = "gvisor"
)

// IsolationFacts is the operator's isolation floor and what the engine
// offers for it. Runtimes are the OCI runtimes the engine registers
// (Info().Runtimes); GVisor is what the probe found of gVisor's runtime,
// GVisorNetwork of its second registration with its own network stack
// (the workers of attempts with services or public_allowlist run under
// it; when it does not work, those are refused).
type IsolationFacts struct {
	Floor         string      `json:"floor"`
	Runtimes      []string    `json:"runtimes"`
	GVisor        GVisorFacts `json:"gvisor"`
	GVisorNetwork GVisorFacts `json:"gvisorNetwork"`
}

// GVisorFacts is what preflight found of gVisor's runtime. Registered says
// the engine lists Runtime; Works says a probe container ran under it (no
// network) and its kernel announced itself as gVisor. Platform is runsc's
// --platform argument in the engine's registration ("" when the engine
// gives none: runsc's own default). ProbeMillis is the probe container's
// create-to-exit time.
type GVisorFacts struct {
	Runtime     string    `json:"runtime"`
	Path        string    `json:"path,omitempty"`
	Args        []string  `json:"args,omitempty"`
	Registered  bool      `json:"registered"`
	Works       bool      `json:"works"`
	Version     string    `json:"version,omitempty"`
	Platform    string    `json:"platform,omitempty"`
	ProbeMillis int64     `json:"probeMillis,omitempty"`
	ProbedAt    time.Time `json:"probedAt,omitzero"`
	Reason      string    `json:"reason,omitempty"`
}
