package actors

import (
	"context"
	"io"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// The interfaces below are what each actor needs from the host, declared at
// the consumer so that tests can inject faults with small fakes.
// *dockerops.Client satisfies every Docker interface; GitHost satisfies Git.

// Git is the trusted host-side git work of one attempt.
type Git interface {
	Prepare(ctx context.Context, d *messages.Dispatch, workDir string) (*gitops.Prepared, error)
	ValidateOutput(outputDir string, expected messages.SandboxIdentity) (*gitops.Output, error)
	ImportResult(ctx context.Context, d *messages.Dispatch, out *gitops.Output, assertCurrent func() error) error
	Publish(ctx context.Context, d *messages.Dispatch, inputSHA, resultSHA string, credential gitops.Credential, assertCurrent func() error) (gitops.PublishResult, error)
}

// PublicationRequest is what a redeemer needs to issue a publication
// credential: the grant, scoped to the attempt and its fence, and the exact
// commit to publish.
type PublicationRequest struct {
	DispatchAttemptID string
	ExecutionLeaseID  string
	FencingToken      string
	RunnerInstanceID  string
	GrantID           string
	Branch            string
	ResultCommitSHA   string
}

// CredentialRedeemer redeems a publication grant for a short-lived
// credential (the server's grant API in production).
type CredentialRedeemer interface {
	Redeem(ctx context.Context, req PublicationRequest) (gitops.Credential, error)
}

// ImageDocker is what the build actor needs.
type ImageDocker interface {
	ImageID(ctx context.Context, ref string) (string, bool, error)
	BuildImage(ctx context.Context, req dockerops.BuildRequest) (string, error)
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

// SamplerDocker is what the memory sampler needs.
type SamplerDocker interface {
	MemoryUsage(ctx context.Context, id string) (uint64, error)
}

// ServiceDocker is what a service actor needs (and the attempt, to write
// the service credentials into the secrets volume).
type ServiceDocker interface {
	CreateService(ctx context.Context, spec dockerops.ServiceSpec) (string, error)
	WaitStopped(ctx context.Context, id string) (dockerops.ContainerState, error)
	RunProbe(ctx context.Context, spec dockerops.ProbeSpec) (int, string, error)
	WriteSecrets(ctx context.Context, name, image, volume string, labels map[string]string, files map[string][]byte) error
}

// SandboxDocker is what the attempt itself needs: the attempt's network and
// volumes, the output copy and the teardown.
type SandboxDocker interface {
	CreateInternalNetwork(ctx context.Context, name string, labels map[string]string) (string, error)
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error
	Teardown(ctx context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error)
}

// Docker is the union of the Docker interfaces, as *dockerops.Client
// provides it.
type Docker interface {
	ImageDocker
	WorkerDocker
	SamplerDocker
	SandboxDocker
	LeaseDocker
	ServiceDocker
}

// Deps are the attempt tree's collaborators.
type Deps struct {
	Git    Git
	Docker Docker
	// Redeemer redeems publication grants; nil refuses bridge_push.
	Redeemer CredentialRedeemer
}
