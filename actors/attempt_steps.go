package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/teardown"
	"github.com/forgedev/forged/messages"
	"golang.org/x/sync/errgroup"
)

// The attempt's host steps. Each is a plain function of an explicit input,
// built on the attempt's mailbox, and returns its result as the message the
// attempt receives: a step never touches the actor. Deadlines are those of
// the layer that talks to the engine or to git (dockerops.Options and
// gitops' per-command timeouts); the attempt adds none of its own, so it
// never cuts a retry short.

// Bounds of the output copied out of the sandbox.
const (
	maxOutputBytes = 600 << 20
	maxOutputFiles = 64
)

func attemptWorkDir(stateRoot, attemptHex string) string {
	return filepath.Join(stateRoot, "attempts", attemptHex)
}

func imageLabels(project, key string) map[string]string {
	return map[string]string{
		"dev.forge.managed-image": "true",
		"dev.forge.project":       dockerops.LabelValue(project),
		"dev.forge.image-key":     key,
	}
}

// prepareInput is what the prepare step reads.
type prepareInput struct {
	git            Git
	d              *messages.Dispatch
	workDir        string
	seccompProfile string
	lsmOption      string
	confinement    Confinement // the engine's and host's facts, read on the mailbox
	cachePolicy    caches.Policy
	verifier       ImageVerifier
	catalogue      *services.Catalogue
	images         services.ImageInspector
}

// prepareStep reads the input from the host repository and validates the
// contract and the runner policy; nothing in Docker exists yet.
func prepareStep(ctx context.Context, in prepareInput) prepareDone {
	if err := os.MkdirAll(in.workDir, 0o700); err != nil {
		return prepareDone{err: failure.Wrap(failure.SandboxInputFailed, err, "create attempt directory")}
	}
	prepared, err := in.git.Prepare(ctx, in.d, in.workDir)
	if err != nil {
		return prepareDone{err: err}
	}
	parsed, err := contract.Parse(prepared.ContractSource)
	if err != nil {
		return prepareDone{err: err}
	}
	if err := checkContractSupported(in.d, parsed.Contract, in.confinement, in.cachePolicy); err != nil {
		return prepareDone{err: err}
	}
	security, err := dockerops.ResolveSecurityOptions(in.d.Sandbox.ExecutionPolicy, in.seccompProfile, in.lsmOption, in.confinement.Security)
	if err != nil {
		return prepareDone{err: err}
	}
	warnings, err := verifyUpstreamImages(ctx, in.verifier, prepared.Dockerfile, in.d.Sandbox.ExecutionPolicy)
	if err != nil {
		return prepareDone{err: err}
	}
	// The catalogue check: before any Docker object exists, and without
	// ever pulling.
	var images map[string]services.Entry
	if declared := parsed.Contract.ServiceTypes(); len(declared) > 0 {
		if images, err = in.catalogue.Verify(ctx, in.images, declared); err != nil {
			return prepareDone{err: err}
		}
		serviceWarnings, err := verifyServiceImages(ctx, in.verifier, declared, images, in.d.Sandbox.ExecutionPolicy)
		if err != nil {
			return prepareDone{err: err}
		}
		warnings = append(warnings, serviceWarnings...)
	}
	// The egress proxy's pinned image, by the same rules.
	var egressImage services.Entry
	// open_public needs it too: its netns guard runs from it.
	if mode := in.d.Sandbox.NetworkPolicy.Mode; mode == messages.NetworkPublicAllowlist || mode == messages.NetworkOpenPublic {
		if egressImage, err = in.catalogue.VerifyEgress(ctx, in.images); err != nil {
			return prepareDone{err: err}
		}
		egressWarnings, err := verifyServiceImages(ctx, in.verifier, []string{services.Egress}, map[string]services.Entry{services.Egress: egressImage}, in.d.Sandbox.ExecutionPolicy)
		if err != nil {
			return prepareDone{err: err}
		}
		warnings = append(warnings, egressWarnings...)
	}
	// A failed state file costs the attempt only its re-adoption.
	stateDigest, _ := writeAdoptionState(in.workDir, in.d, prepared, security)
	return prepareDone{prepared: prepared, contract: parsed, security: security, signatureWarnings: warnings, serviceImages: images, egressImage: egressImage,
		stateDigest: stateDigest}
}

// provisionInput is what the provision step reads.
type provisionInput struct {
	docker SandboxDocker
	// planned answers once the ledger in state starting, listing the
	// planned resources, is durable (or could not be written).
	planned <-chan error
	names   dockerops.Names
	labels  map[string]string
	// volumes, when set, bounds the workspace (workspaceBytes) and the
	// control volume (sized from the bundle at bundlePath).
	volumes        VolumeStore
	workspaceBytes int64
	bundlePath     string
	// credentials, when set, fill the secrets volume with the provider's
	// credentials (credentials.go).
	credentials *credentialsInput
	// caches are the contract's caches of the dispatch's project; each
	// per-attempt one is bounded to cacheBytes with a volume store.
	caches     []contract.Cache
	project    string
	cacheBytes int64
	// user is the attempt's sandbox user: the workspace, control and
	// per-attempt cache volumes are made its own, through a helper
	// container from image (OwnVolumes), unless it is the image's user.
	user  messages.SandboxUser
	image string
}

// CredentialsVolumeBytes bounds a writable credentials volume when the
// attempt's volumes are bounded (a volume store): a refreshed token is
// small.
const CredentialsVolumeBytes = 16 << 20

// provisionStep makes the ledger durable with the planned resources, then
// creates the attempt's volumes, each labelled with the attempt's
// ownership. The ledger comes first so that a crash from here on leaves
// something for the reaper to find. No attempt network is created: the
// worker runs with network none (no attempt needs services or egress yet;
// when one does, it gets a dockerops.CreateIsolatedNetwork network).
func provisionStep(ctx context.Context, in provisionInput) provisionDone {
	if err := <-in.planned; err != nil {
		return provisionDone{err: failure.Wrap(failure.SandboxCreateFailed, err, "write the attempt's ledger")}
	}
	bounded, bundlePlaced, err := boundVolumes(ctx, in)
	if err != nil {
		return provisionDone{err: err}
	}
	attemptVolumes := []string{in.names.WorkspaceVolume, in.names.ControlVolume, in.names.SecretsVolume}
	if in.credentials.ownVolume() {
		attemptVolumes = append(attemptVolumes, in.names.CredentialsVolume)
		if bounded != nil && in.credentials.writable() {
			if bounded[in.names.CredentialsVolume], err = in.volumes.ProvisionSpec(ctx, in.names.CredentialsVolume, quota.Spec{Bytes: CredentialsVolumeBytes}); err != nil {
				return provisionDone{err: err}
			}
		}
	}
	// The volumes are independent: they are created at once.
	var volumes errgroup.Group
	for _, volume := range attemptVolumes {
		volumes.Go(func() error {
			if err := in.docker.CreateVolumeWithOptions(ctx, volume, in.labels, bounded[volume]); err != nil {
				return failure.Wrap(failure.SandboxCreateFailed, err, "create volume %s", volume)
			}
			return nil
		})
	}
	if err := volumes.Wait(); err != nil {
		return provisionDone{err: err}
	}
	if in.credentials != nil {
		if err := loadCredentials(ctx, in.docker, in.names, in.labels, *in.credentials); err != nil {
			return provisionDone{err: err}
		}
	}
	if in.credentials.writable() {
		// The sandbox user may create files beside its credentials (a
		// refreshed token written and renamed over the old one). No
		// copy-up gives the image's user this volume: it is owned always.
		if err := in.docker.OwnVolumes(ctx, in.image, in.names.VolumeOwner, in.labels,
			[]dockerops.OwnedVolume{{Volume: in.names.CredentialsVolume}}, in.credentials.user); err != nil {
			return provisionDone{err: err}
		}
	}
	mounts, missing, err := provisionCaches(ctx, in)
	if err == nil {
		err = ownVolumes(ctx, in, mounts)
	}
	return provisionDone{cacheMounts: mounts, cachesMissing: missing, bundlePlaced: bundlePlaced, err: err}
}

// ownVolumes gives the attempt's writable volumes (workspace, control with
// input/ and output/, each per-attempt cache) to its sandbox user, before
// the worker exists. The image's user needs none: the engine's copy-up and
// mkfs give its volumes to it; nor do bounded volumes, whose images are
// made the sandbox user's (imageOwner), and which all of them are with a
// volume store.
func ownVolumes(ctx context.Context, in provisionInput, caches []dockerops.CacheMount) error {
	if in.user == messages.ImageUser || in.volumes != nil {
		return nil
	}
	volumes := []dockerops.OwnedVolume{{Volume: in.names.WorkspaceVolume}, {Volume: in.names.ControlVolume, Dirs: []string{"input", "output"}}}
	for _, c := range caches {
		if !c.ReadOnly {
			volumes = append(volumes, dockerops.OwnedVolume{Volume: c.Volume})
		}
	}
	return in.docker.OwnVolumes(ctx, in.image, in.names.VolumeOwner, in.labels, volumes, in.user)
}

// provisionCaches creates each per-attempt cache volume (a bounded image
// owned by the worker with a volume store, labelled with the attempt's
// ownership and the cache) and finds each read-only project cache. A
// project cache that was never warmed, or a volume of that name that is
// not exactly the project cache's, is not mounted: it is listed in
// missing.
func provisionCaches(ctx context.Context, in provisionInput) (mounts []dockerops.CacheMount, missing []string, err error) {
	for _, c := range in.caches {
		target, _ := caches.Target(c.Name)
		switch c.Mode {
		case contract.CachePerAttempt:
			volume := in.names.CacheVolume(c.Name)
			var opts map[string]string
			if in.volumes != nil {
				if opts, err = in.volumes.ProvisionSpec(ctx, volume, quota.Spec{Bytes: in.cacheBytes, Owner: imageOwner(in.user)}); err != nil {
					return nil, nil, err
				}
			}
			if err := in.docker.CreateVolumeWithOptions(ctx, volume, caches.AttemptLabels(in.labels, c.Name), opts); err != nil {
				return nil, nil, failure.Wrap(failure.SandboxCreateFailed, err, "create volume %s", volume)
			}
			mounts = append(mounts, dockerops.CacheMount{Volume: volume, Target: target})
		case contract.CacheReadOnly:
			volume := caches.ProjectVolume(in.project, c.Name)
			labels, found, err := in.docker.VolumeLabels(ctx, volume)
			if err != nil {
				return nil, nil, err
			}
			if !found || !maps.Equal(labels, caches.ProjectLabels(in.project, c.Name)) {
				missing = append(missing, c.Name)
				continue
			}
			mounts = append(mounts, dockerops.CacheMount{Volume: volume, Target: target, ReadOnly: true})
		}
	}
	return mounts, missing, nil
}

// boundVolumes makes the fixed-size filesystems of the workspace (the
// dispatch's workspaceBytes) and of the control volume (the input bundle
// and the output budget, with input/ and output/ made for the worker), both
// owned by the attempt's sandbox user, and returns each volume's driver
// options. The input bundle is written into the control image
// (bundlePlaced) when its path can be handed to debugfs. Without a volume
// store the volumes stay plain. The teardown releases whatever was made.
func boundVolumes(ctx context.Context, in provisionInput) (opts map[string]map[string]string, bundlePlaced bool, err error) {
	if in.volumes == nil {
		return nil, false, nil
	}
	info, err := os.Stat(in.bundlePath)
	if err != nil {
		return nil, false, failure.Wrap(failure.SandboxInputFailed, err, "stat input bundle")
	}
	owner := imageOwner(in.user)
	control := quota.Spec{Bytes: quota.ControlBytes(info.Size(), in.workspaceBytes), Owner: owner, Dirs: []string{"input", "output"}}
	if quota.Placeable(in.bundlePath) {
		control.Files = []quota.File{{Dir: "input", Name: gitops.InputBundle, Source: in.bundlePath}}
	}
	// The two filesystems are made at once (mkfs and a loop device each).
	var wsOpts, ctlOpts map[string]string
	var images errgroup.Group
	images.Go(func() (err error) {
		wsOpts, err = in.volumes.ProvisionSpec(ctx, in.names.WorkspaceVolume, quota.Spec{Bytes: in.workspaceBytes, Owner: owner})
		return err
	})
	images.Go(func() (err error) {
		ctlOpts, err = in.volumes.ProvisionSpec(ctx, in.names.ControlVolume, control)
		return err
	})
	if err := images.Wait(); err != nil {
		return nil, false, err
	}
	return map[string]map[string]string{in.names.WorkspaceVolume: wsOpts, in.names.ControlVolume: ctlOpts}, len(control.Files) > 0, nil
}

// imageOwner is the owner of a bounded volume's image for the attempt's
// sandbox user: the zero user (the store's, the image's user) for the
// image's user.
func imageOwner(user messages.SandboxUser) messages.SandboxUser {
	if user.OrImage() == messages.ImageUser {
		return messages.SandboxUser{}
	}
	return user
}

// discardWorkspace returns what the sampler calls before it releases the
// worker: the workspace volume's filesystem shut down without write-back
// (VolumeStore.Discard), or nil without a volume store.
func (a *attemptActor) discardWorkspace() func(ctx context.Context) error {
	if a.deps.Volumes == nil {
		return nil
	}
	store, volume := a.deps.Volumes, a.in.names.WorkspaceVolume
	return func(ctx context.Context) error {
		_, err := store.Discard(ctx, volume)
		return err
	}
}

// dropWorkspace returns what the collect step calls once the worker has
// exited (VolumeStore.Drop of the workspace), or nil without a store.
func (a *attemptActor) dropWorkspace() func(ctx context.Context) error {
	if a.deps.Volumes == nil {
		return nil
	}
	store, volume := a.deps.Volumes, a.in.names.WorkspaceVolume
	return func(ctx context.Context) error { return store.Drop(ctx, volume) }
}

// copyOutput returns the collect step's copy of the output directory out
// of the control volume's image (VolumeStore.CopyDirOut) for a worker that
// exited 0, or nil: without a volume store, and after any other exit,
// whose diagnosis keeps what the engine's copy tells (an engine that went
// away while it stopped the worker fails that copy, and so names itself).
func (a *attemptActor) copyOutput(workerExit int) func(ctx context.Context, hostDir string) (bool, error) {
	if a.deps.Volumes == nil || workerExit != 0 {
		return nil
	}
	store, volume := a.deps.Volumes, a.in.names.ControlVolume
	dir := strings.TrimPrefix(messages.OutputDir, messages.ControlDir+"/")
	return func(ctx context.Context, hostDir string) (bool, error) {
		return store.CopyDirOut(ctx, volume, dir, hostDir, maxOutputBytes, maxOutputFiles)
	}
}

// storageFull returns the check the worker runs once the container has
// exited: a description of every bounded volume the host finds full, or
// "" (nil without a volume store).
func (a *attemptActor) storageFull() func(ctx context.Context) string {
	if a.deps.Volumes == nil {
		return nil
	}
	store, volumes := a.deps.Volumes, []string{a.in.names.WorkspaceVolume, a.in.names.ControlVolume}
	for _, c := range a.perAttemptCaches() {
		volumes = append(volumes, a.in.names.CacheVolume(c))
	}
	return func(ctx context.Context) string {
		var full []string
		for _, v := range volumes {
			if u, err := store.Usage(ctx, v); err == nil && u.Full() {
				full = append(full, fmt.Sprintf("volume %s is full (%d of %d bytes free, %d inodes free, from the host's %s)",
					v, u.FreeBytes, u.TotalBytes, u.FreeInodes, u.Source))
			}
		}
		return strings.Join(full, "; ")
	}
}

// collectInput is what the collect step reads.
type collectInput struct {
	docker      SandboxDocker
	git         Git
	workDir     string
	containerID string
	identity    messages.SandboxIdentity
	// recorded, when set, answers once the ledger says the worker's exit
	// was seen (readopt.go): nothing is imported before a restart could
	// know that.
	recorded <-chan error
	// dropWorkspace, when set, lets go of the discarded workspace's
	// filesystem (VolumeStore.Drop, which does not wait for the kernel to
	// free it).
	dropWorkspace func(context.Context) error
	// copyOut, when set, copies the output directory out of the control
	// volume's image into hostDir without the engine; false leaves the copy
	// to the engine (VolumeStore.CopyDirOut).
	copyOut func(ctx context.Context, hostDir string) (bool, error)
}

// collectStep copies /control/output out of the stopped worker and
// validates it.
func collectStep(ctx context.Context, in collectInput) collectDone {
	if in.recorded != nil {
		<-in.recorded // a failed write costs only the exactness of a re-adoption
	}
	outputDir := filepath.Join(in.workDir, "output")
	if err := os.RemoveAll(outputDir); err != nil {
		return collectDone{err: fmt.Errorf("clear output directory: %w", err)}
	}
	// The control volume's image is read directly when it can be (no
	// engine call: the engine's copy re-executes dockerd and mounts the
	// stopped container's volumes again); the engine's copy otherwise,
	// which also gives the verdict on anything unusual the task left.
	copied := false
	if in.copyOut != nil {
		copied, _ = in.copyOut(ctx, outputDir) // an error only means the engine's copy is taken
	}
	var err error
	if !copied {
		err = in.docker.CopyDirOut(ctx, in.containerID, messages.OutputDir, outputDir, maxOutputBytes, maxOutputFiles)
	} else {
		err = stillThere(ctx, in.docker, in.containerID)
	}
	if in.dropWorkspace != nil {
		// After the copy: the engine mounts a stopped container's volumes
		// again for it, and the unmount that ends the copy would free the
		// workspace (as its last holder) before the copy returns.
		_ = in.dropWorkspace(ctx) // the release drops it otherwise
	}
	if err != nil {
		return collectDone{err: err}
	}
	output, err := in.git.ValidateOutput(outputDir, in.identity)
	return collectDone{output: output, err: err}
}

// stillThere asks the engine what its copy of the output would also have
// told: that it answers and that the worker container still exists (an
// inspect: no re-execution, no mount). An engine that went away while the
// worker ran fails the attempt as it did when the copy needed it, and a
// container that is gone is output missing, as the copy says.
func stillThere(ctx context.Context, docker SandboxDocker, containerID string) error {
	_, err := docker.InspectState(ctx, containerID)
	if err != nil && dockerops.IsNotFound(err) {
		return failure.Wrap(failure.SandboxOutputMissing, err, "the worker container is gone: %v", err)
	}
	return err
}

// importInput is what the import step reads. fence is safe for concurrent
// use: the currency check runs at the moment of the move.
type importInput struct {
	git    Git
	d      *messages.Dispatch
	output *gitops.Output
	fence  *fence
}

// importStep imports the validated result through the quarantine and moves
// the managed branch, fenced.
func importStep(ctx context.Context, in importInput) importDone {
	summary := readSummary(in.output.ResultPath)
	if in.output.Manifest.ResultCommitSHA == nil {
		return importDone{summary: summary}
	}
	token := in.d.Lease.FencingToken
	report, err := in.git.ImportResult(ctx, in.d, in.output, func() error { return in.fence.assertCurrent(token) })
	if err != nil {
		return importDone{summary: summary, err: err}
	}
	result := *in.output.Manifest.ResultCommitSHA
	if report.ResultCommitSHA != "" {
		result = report.ResultCommitSHA // rewritten at import (the publish policy)
	}
	return importDone{result: result, report: report, summary: summary}
}

// teardownInput is what the teardown step reads.
type teardownInput struct {
	docker teardown.Docker
	ledger *ledgerWriter
	req    teardown.Request
	// workDir is the attempt's private copies ("" when it has none),
	// removed with removeAll after a clean teardown only: nothing else
	// refers to them.
	workDir   string
	removeAll func(string) error
}

// teardownStep releases the attempt through the one teardown operation
// (internal/teardown): by ownership labels, report persisted, ledger moved
// through its table. Its writes queue behind every ledger write the
// attempt posted before it.
// Once the release is clean it removes the attempt's work directory, here
// off the mailbox like every other filesystem call.
func teardownStep(ctx context.Context, in teardownInput) teardownDone {
	result := teardown.Release(ctx, in.docker, in.ledger, in.req)
	if !result.Degraded() && in.workDir != "" {
		_ = in.removeAll(in.workDir)
	}
	return teardownDone{result: result}
}

// readSummary returns the summary of the worker's validated result.json,
// or "" when it cannot be read.
func readSummary(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var result messages.ResultPacket
	if json.Unmarshal(raw, &result) != nil {
		return ""
	}
	return result.Summary
}
