package actors

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/internal/publish/providerauth"
	"github.com/forgedev/forged/messages"
)

// The interfaces below are what each actor needs from the host, declared at
// the consumer so that tests can inject faults with small fakes.
// *dockerops.Client satisfies every Docker interface; GitHost satisfies Git.

// Git is the trusted host-side git work of one attempt.
type Git interface {
	Prepare(ctx context.Context, d *messages.Dispatch, workDir string) (*gitops.Prepared, error)
	// OpenContext writes the prepared attempt's build context into a new
	// unlinked file in dir and returns it at its start, or refuses a
	// context whose digest is not p.ContextDigest (gitops.OpenContext).
	OpenContext(ctx context.Context, p *gitops.Prepared, dir string) (*os.File, error)
	ValidateOutput(outputDir string, expected messages.SandboxIdentity) (*gitops.Output, error)
	ImportResult(ctx context.Context, d *messages.Dispatch, out *gitops.Output, assertCurrent func() error) (gitops.ImportReport, error)
	Publish(ctx context.Context, d *messages.Dispatch, inputSHA, resultSHA string, credential gitops.Credential, assertCurrent func() error) (gitops.PublishResult, error)
}

// CredentialRedeemer redeems a publication grant for a short-lived
// credential (the server's grant API in production).
type CredentialRedeemer interface {
	Redeem(ctx context.Context, req messages.PublicationRequest) (gitops.Credential, error)
}

// ImageDocker is what the build actor needs.
type ImageDocker interface {
	ImageID(ctx context.Context, ref string) (string, bool, error)
	ImageLabels(ctx context.Context, ref string) (id string, labels map[string]string, found bool, err error)
	BuildImage(ctx context.Context, req dockerops.BuildRequest) (string, error)
}

// ImageArchiver exports and removes images, for the image policy
// (dockerops.Client): the SBOM is generated from the exported image, and a
// stale or refused image's tags are removed.
type ImageArchiver interface {
	SaveImage(ctx context.Context, ref, dst string) error
	RemoveImage(ctx context.Context, ref string) error
}

// WorkerDocker is what the worker actor needs.
type WorkerDocker interface {
	CreateWorker(ctx context.Context, spec dockerops.WorkerSpec) (string, error)
	CopyFileInto(ctx context.Context, containerID, dstDir, name string, src io.Reader, size int64, uid, gid int, mode int64) error
	RunAttached(ctx context.Context, containerID string, stdin []byte, onStdoutLine func([]byte) error, limits dockerops.RunLimits) (dockerops.RunResult, error)
	InspectState(ctx context.Context, id string) (dockerops.ContainerState, error)
}

// LeaseDocker pushes a signed lease update into a running worker.
type LeaseDocker interface {
	WriteLeaseUpdate(ctx context.Context, containerID string, update []byte) error
}

// SamplerDocker is what the memory sampler needs: the init pid (to find
// the cgroup), stats where the cgroup cannot be read, and the worker's
// release after the last reading.
type SamplerDocker interface {
	MemoryUsage(ctx context.Context, id string) (uint64, error)
	InspectState(ctx context.Context, id string) (dockerops.ContainerState, error)
	ReleaseWorker(ctx context.Context, containerID string) error
}

// SidecarDocker is what a sidecar actor needs (a service, the egress
// proxy: the container, its inspection on re-adoption, its watch, its
// readiness probe, its log and its stop), and the attempt for its sidecars: the isolated attempt network
// they share with the worker, the routed egress network (or an
// open_public attempt network), and the service credentials in the
// secrets volume.
type SidecarDocker interface {
	CreateIsolatedNetwork(ctx context.Context, name string, labels map[string]string) (dockerops.IsolatedNetwork, error)
	CreateRoutedNetwork(ctx context.Context, name string, labels map[string]string, shared bool) (string, error)
	WriteSecrets(ctx context.Context, name, image, volume string, labels map[string]string, files map[string][]byte) error
	CreateSidecar(ctx context.Context, spec dockerops.Sidecar) (string, error)
	StartNetnsHolder(ctx context.Context, h dockerops.NetnsHolder) (dockerops.HeldNetns, error)
	GuardNetns(ctx context.Context, target string, g dockerops.NetGuard) error
	WaitStopped(ctx context.Context, id string) (dockerops.ContainerState, error)
	InspectState(ctx context.Context, id string) (dockerops.ContainerState, error)
	RunProbe(ctx context.Context, spec dockerops.ProbeSpec) (int, string, error)
	FollowLogLines(ctx context.Context, id string, maxLine int, onLine func([]byte)) (int, error)
	StopContainer(ctx context.Context, id string, grace time.Duration) error
}

// SandboxDocker is what the attempt itself needs: the attempt's volumes,
// the output copy and the teardown.
type SandboxDocker interface {
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	CreateVolumeWithOptions(ctx context.Context, name string, labels, driverOpts map[string]string) error
	CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error
	InspectState(ctx context.Context, id string) (dockerops.ContainerState, error)
	Teardown(ctx context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error)
	LoadVolume(ctx context.Context, image, name, volume string, labels map[string]string, files []dockerops.VolumeFile, uid, gid int) error
	OwnVolumes(ctx context.Context, image, name string, labels map[string]string, volumes []dockerops.OwnedVolume, user messages.SandboxUser) error
	// VolumeLabels finds a project's read-only cache volume.
	VolumeLabels(ctx context.Context, name string) (map[string]string, bool, error)
}

// ImageVerifier is the image-signature hook (imagesig.Verifier): nil from
// Verify means the reference is verified.
type ImageVerifier interface {
	Verify(ctx context.Context, ref string) error
}

// ProviderAuth prepares the agent's model-provider credentials
// (providerauth.Adapters): Check refuses a provider no adapter serves,
// before anything exists; Prepare runs the provider's helper into dir and
// returns the files, never keeping them on the host.
type ProviderAuth interface {
	Check(provider, authKind string) error
	Prepare(ctx context.Context, dir string, req providerauth.Request) ([]dockerops.VolumeFile, error)
}

// Docker is the union of the Docker interfaces, as *dockerops.Client
// provides it.
type Docker interface {
	ImageDocker
	WorkerDocker
	SamplerDocker
	SandboxDocker
	LeaseDocker
	SidecarDocker
}

// VolumeStore bounds the attempt's workspace and control volumes with
// fixed-size filesystems and measures them from the host (quota.Store).
// Release is the Docker teardown's business (dockerops.Options.VolumeImages).
// The images are made owned by the attempt's sandbox user and the control
// volume's holds the input bundle (quota.Spec), so that no engine call is
// spent on either.
type VolumeStore interface {
	ProvisionSpec(ctx context.Context, volume string, spec quota.Spec) (map[string]string, error)
	Usage(ctx context.Context, volume string) (quota.Usage, error)
	// Discard shuts down the filesystem of a volume nobody will read
	// again, dropping what it has not written back (quota.Store.Discard);
	// false when it is not mounted where the host can reach it.
	Discard(ctx context.Context, volume string) (bool, error)
	// Drop lets go of a discarded volume's filesystem, which the kernel
	// then frees, without waiting for that (quota.Store.Drop).
	Drop(ctx context.Context, volume string) error
	// CopyDirOut copies a directory of a volume whose filesystem the
	// engine has unmounted into hostDir without the engine
	// (quota.Store.CopyDirOut); false when it cannot say as plainly as the
	// engine's copy would, which the caller then takes.
	CopyDirOut(ctx context.Context, volume, dir, hostDir string, maxBytes int64, maxFiles int) (bool, error)
}

// Deps are the attempt tree's collaborators.
type Deps struct {
	Git    Git
	Docker Docker
	// Volumes, when set, bounds the attempt's volumes; nil leaves them
	// plain (preflight reports why).
	Volumes VolumeStore
	// Redeemer redeems publication grants; nil refuses bridge_push.
	Redeemer CredentialRedeemer
	// ProviderAuth prepares provider credentials; nil refuses every
	// dispatch that names a provider with sandbox_auth_unavailable.
	ProviderAuth ProviderAuth
	// ImageVerifier verifies upstream images; nil verifies none, which
	// sandbox_required refuses and adoption warns about.
	ImageVerifier ImageVerifier
	// ImagePolicy is the operator's image policy (SBOM, vulnerability
	// gate, signed provenance, records); nil evaluates nothing. Its SBOM
	// needs Docker to be an ImageArchiver too.
	ImagePolicy *imagepolicy.Policy
	// Kernel reads containers' kernel counters; nil means HostKernel
	// (this host's /proc and cgroup mounts).
	Kernel KernelCounters
	// ImageRefs, when set, counts the image keys attempts use, so that an
	// image collection never removes one under an attempt: the build actor
	// acquires the key before its cache lookup, the attempt releases it
	// when it stops.
	ImageRefs *imagegc.Refs
}
